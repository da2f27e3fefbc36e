"""Several windows on one chat: the app beside another client of the same service (a second
window, as the protocol sees one). Every message shows in every window, held while a turn runs;
a permission request goes to the window whose message the turn answers, or to another once that
one has gone."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest
from tui_support import (
    agent_of,
    app_of,
    enter_line,
    log_of,
    running,
    script,
    wait_until,
    write_config,
)

from evertalk.client.remote import Received, Remote, open_remote
from evertalk.protocol.events import MessageSent
from evertalk.protocol.replies import Accepted, Ask, AskClosed
from evertalk.protocol.requests import Answer, Send
from evertalk.tui.app import ChatApp
from evertalk.tui.widgets import NoteRow, PermissionScreen, ReplyView, ToolRow, UserRow
from fakes import AnthropicFake, ToolCall, reply, slow
from fakes import chat as answer

pytestmark = pytest.mark.anyio


def users(app: ChatApp) -> list[tuple[str, bool]]:
    """The user rows: (text, held)."""
    return [(row.text, row.has_class("held")) for row in app.query(UserRow)]


def waits_elsewhere(app: ChatApp) -> list[str]:
    return [row.text for row in app.query(NoteRow) if "waits for an answer" in row.text]


def replies(app: ChatApp) -> list[str]:
    return [view.source for view in app.query(ReplyView)]


class Window:
    """Another client of the service: what it is sent, in order, and requests."""

    def __init__(self, remote: Remote) -> None:
        self.remote = remote
        self.frames: list[Received] = []

    async def read(self) -> None:
        async for frame in self.remote.frames():
            self.frames.append(frame)

    def asks(self) -> list[Ask]:
        return [frame for frame in self.frames if isinstance(frame, Ask)]

    async def send(self, text: str) -> Accepted:
        return await self.remote.request(Send(text=text, key=text), Accepted)


@asynccontextmanager
async def window(home: Path) -> AsyncIterator[Window]:
    remote = await open_remote(home, "other", start=False)
    other = Window(remote)
    async with anyio.create_task_group() as group:
        group.start_soon(remote.run)
        group.start_soon(other.read)
        try:
            yield other
        finally:
            await remote.aclose()


async def test_a_message_from_another_window_shows_held_then_delivered(tmp_path: Path) -> None:
    home = tmp_path / "home"
    write_config(home)
    fake = AnthropicFake(script().push(slow(1.5, answer("First.")), answer("Second.")))
    async with running(home, fake) as pilot, window(home) as other:
        app = app_of(pilot)
        await enter_line(pilot, "the first question")
        await wait_until(pilot, lambda: agent_of(app).busy)
        accepted = await other.send("from the other window")
        assert accepted.held is True
        await wait_until(pilot, lambda: len(users(app)) == 2)
        assert users(app) == [("the first question", False), ("from the other window", True)]
        await wait_until(pilot, lambda: replies(app) == ["First.", "Second."], timeout=20)
        assert users(app) == [("the first question", False), ("from the other window", False)]
        sent = [f for f in other.frames if isinstance(f, MessageSent)]
        assert [(f.text, f.held) for f in sent] == [
            ("the first question", False),
            ("from the other window", True),
        ]
        assert sent[0].client.startswith("app ") and sent[1].client.startswith("other ")
    assert log_of(home) == [
        ("user", "the first question"),
        ("ever", "First."),
        ("user", "from the other window"),
        ("ever", "Second."),
    ]


async def test_a_permission_request_goes_to_the_window_that_sent_the_message(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    write_config(home)  # shell asks
    fake = AnthropicFake(
        script().push(
            reply(ToolCall("shell", {"command": "echo from-the-other"})),
            answer("It ran there."),
        )
    )
    async with running(home, fake) as pilot, window(home) as other:
        app = app_of(pilot)
        await other.send("run it for me")
        await wait_until(pilot, lambda: bool(other.asks()))
        (ask,) = other.asks()
        assert ask.tool == "shell" and ask.input == {"command": "echo from-the-other"}
        assert not isinstance(app.screen, PermissionScreen)  # not this window's message
        # this window says where the turn waits, until the question is answered
        await wait_until(pilot, lambda: bool(waits_elsewhere(app)))
        assert waits_elsewhere(app) == ["Ever waits for an answer in another window (other): shell"]
        await other.remote.post(Answer(id=ask.id, decision="once"))
        await wait_until(pilot, lambda: replies(app) == ["It ran there."])
        await wait_until(pilot, lambda: not waits_elsewhere(app))
        row = app.query_one(ToolRow)
        assert not row.is_error and "from-the-other" in row.output_text
        assert AskClosed(id=ask.id) in other.frames
        assert not isinstance(app.screen, PermissionScreen)


async def test_the_request_goes_to_another_window_when_the_sender_has_gone(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    write_config(home)
    fake = AnthropicFake(
        script().push(reply(ToolCall("shell", {"command": "echo here"})), answer("Ran it."))
    )
    async with running(home, fake) as pilot:
        app = app_of(pilot)
        async with window(home) as other:
            await other.send("run it, then I go")
            await wait_until(pilot, lambda: bool(other.asks()))
        # the window that sent it closed unanswered: this one is asked now
        await wait_until(pilot, lambda: isinstance(app.screen, PermissionScreen), timeout=10)
        dialog = app.screen
        assert isinstance(dialog, PermissionScreen)
        await wait_until(pilot, lambda: dialog.answerable)
        await pilot.press("left", "left", "enter")  # Allow once
        await wait_until(pilot, lambda: replies(app) == ["Ran it."])
    assert [kind for kind, _ in log_of(home)] == ["user", "tool", "echo", "ever"]
