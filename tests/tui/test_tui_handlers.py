"""The app shows the service's frames through Textual's handlers: each event of the protocol
has a message class, and that class exactly one handler among the app's pumps."""

from __future__ import annotations

import inspect
import os
import re
from pathlib import Path
from typing import Any

import anyio
import pytest
from anyio.abc import SocketStream, TaskStatus
from textual.message import Message
from tui_support import SIZE, wait_until

from evertalk import __version__, tui
from evertalk.client.remote import open_remote
from evertalk.protocol import events, frames, replies, wire
from evertalk.protocol.paths import socket_path
from evertalk.tui.app import ChatApp
from evertalk.tui.log_rows import LogRows
from evertalk.tui.service_messages import Arrived, arrived
from evertalk.tui.turn_rows import TurnRows
from evertalk.tui.widgets import NoteRow

PUMPS = (ChatApp, TurnRows, LogRows)

pytestmark = pytest.mark.anyio


def event_classes() -> list[type[Any]]:
    """Every class `protocol/events.py` defines: each is an event of the protocol."""
    return [
        value
        for value in vars(events).values()
        if inspect.isclass(value)
        and value.__module__ == events.__name__
        and issubclass(value, events.Event)
        and value is not events.Event
    ]


def handlers_of(message: type[Message]) -> list[str]:
    """The methods of the app's pumps that Textual calls for `message`: by `@on`, or by name."""
    found = []
    for pump in PUMPS:
        for name, value in vars(pump).items():
            kinds = [kind for kind, _ in getattr(value, "_textual_on", [])]
            if message in kinds or name == message.handler_name:
                found.append(f"{pump.__name__}.{name}")
    return found


def shown_frames() -> list[type[Any]]:
    """The frames that reach the app unasked: every event, and the others but the welcome
    (the handshake's), with the error that answers no request."""
    unasked = [cls for cls in frames.UnaskedFrame.__args__ if cls is not replies.Welcome]
    return [*event_classes(), *unasked, replies.Error]


def test_every_event_of_the_protocol_has_a_message() -> None:
    kinds = Arrived.kinds()
    missing = [cls.__name__ for cls in shown_frames() if cls not in kinds]
    assert not missing
    assert set(wire.EVENT_NAMES.values()) <= set(kinds)


def test_every_frame_has_exactly_one_handler() -> None:
    counts = {cls.__name__: handlers_of(Arrived.kinds()[cls]) for cls in shown_frames()}
    assert {name: found for name, found in counts.items() if len(found) != 1} == {}


def test_an_event_subclass_goes_as_its_protocol_class() -> None:
    class Costed(events.Retrying):
        pass

    message = arrived(Costed(attempt=1, of=3, delay=0.5, why="overloaded"))
    assert message is not None
    assert type(message) is Arrived.kinds()[events.Retrying]


async def scripted_service(
    home: Path, pushed: list[dict[str, Any]], *, task_status: TaskStatus[None]
) -> None:
    """A service on the home's socket that greets, answers `records` with an empty log and any
    other request with an error, and sends `pushed` once the client has said hello: frames a
    real service would not send."""

    async def serve(stream: SocketStream) -> None:
        reader = wire.FrameReader()
        async with stream:
            while True:
                try:
                    data = await stream.receive()
                except (anyio.EndOfStream, anyio.BrokenResourceError):
                    return
                for frame in reader.feed(data):
                    for reply in replies_to(frame):
                        await stream.send(wire.encode(reply))

    def replies_to(frame: dict[str, Any]) -> list[dict[str, Any]]:
        rid = frame.get("rid")
        if frame["type"] == "hello":
            welcome = {"protocol": wire.PROTOCOL, "version": __version__, "pid": os.getpid()}
            return [{"type": "welcome", **welcome, "home": str(home), "name": "app 1"}, *pushed]
        if frame["type"] == "records":
            return [{"type": "records", "t": 0, "records": [], "rid": rid}]
        return [{"type": "error", "kind": "not_ready", "message": "scripted", "rid": rid}]

    path = socket_path(home)
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    async with await anyio.create_unix_listener(path) as listener:
        task_status.started()
        await listener.serve(serve)


async def test_a_broken_frame_is_one_line_and_an_unknown_one_is_skipped(tmp_path: Path) -> None:
    home = tmp_path / "home"
    pushed = [
        {"type": "frob", "text": "from a newer service"},
        {"type": "frob", "text": "again"},
        {"type": "turn_ended"},  # its reason missing
        {"type": "memory_warning", "text": "memory: the last frame"},
    ]
    async with anyio.create_task_group() as group:
        await group.start(scripted_service, home, pushed)
        app = ChatApp(home, connector=lambda **_: open_remote(home, "app", start=False))
        async with app.run_test(size=SIZE) as pilot:
            await wait_until(pilot, lambda: "memory: the last frame" in notes(app))
            said = [text for text in notes(app) if "frob" in text or "turn_ended" in text]
            # a newer service's frame is skipped by the connection, unsaid; a broken one is
            # the connection's one typed error, said in a row, and the next frame still shows
            assert said == ["the service sent a broken frame: turn_ended: 'reason'"]
        group.cancel_scope.cancel()


def notes(app: ChatApp) -> list[str]:
    return [row.text for row in app.query(NoteRow)]


async def test_a_reply_no_one_waits_for_never_reaches_the_chat(tmp_path: Path) -> None:
    """A reply whose request no one waits for any more (a cancel's `ok`, a status asked as the
    window closed) comes as the service's other frames do: it goes to the log, not a row."""
    home = tmp_path / "home"
    pushed = [
        {"type": "ok"},
        {"type": "ok", "rid": 999},
        {"type": "accepted", "ids": [0], "duplicate": False},
        {"type": "memory_warning", "text": "memory: the last one"},
    ]
    async with anyio.create_task_group() as group:
        await group.start(scripted_service, home, pushed)
        app = ChatApp(home, connector=lambda **_: open_remote(home, "app", start=False))
        async with app.run_test(size=SIZE) as pilot:
            await wait_until(pilot, lambda: "memory: the last one" in notes(app))
            shown = [str(row.render()) for row in app.chat_log.children]
            assert not [text for text in shown if "frame" in text or "ok" in text.split()]
        group.cancel_scope.cancel()


def test_the_app_reads_no_frame_by_its_keys() -> None:
    """Frames are read as their types: no `frame.get("…")` or `reply["…"]` in the app."""
    by_key = re.compile(r"\b(frame|reply|preview|done|answer|item)(\.get\(|\[\")")
    folder = Path(tui.__file__).parent
    found = [
        f"{path.name}:{number}: {line.strip()}"
        for path in sorted(folder.glob("*.py"))
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if by_key.search(line)
    ]
    assert found == []
