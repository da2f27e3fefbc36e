"""The requests through which other agents share the memory: `view`, `zoom`, `date`, `append`,
sent over the service's real socket to a service run in this test's event loop (its agent on
the in-process fake)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

from evertalk.chat import Chat
from evertalk.client.remote import Remote, RequestFailed, open_remote
from evertalk.protocol.events import Quiet, Recorded, TurnStarted
from evertalk.protocol.replies import Accepted, Appended, Date, View, Zoom
from evertalk.protocol.requests import Append, GetDate, GetView, GetZoom, OutsideMessage, Send
from fakes import AnthropicFake, slow
from fakes import chat as answer
from tui.tui_support import fake_opener, hosted, log_of, script, write_config

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def client(home: Path, fake: AnthropicFake) -> AsyncIterator[tuple[Remote, list[Any]]]:
    """A client of a service for `home`, and the frames it was sent that are not replies."""
    async with hosted(home, fake_opener(home, fake)) as host:
        await host.connect()  # starts the service
        remote = await open_remote(home, "mcp", start=False)
        seen: list[Any] = []

        async def read() -> None:
            async for frame in remote.frames():
                seen.append(frame)

        async with anyio.create_task_group() as group:
            group.start_soon(remote.run)
            group.start_soon(read)
            try:
                yield remote, seen
            finally:
                await remote.aclose()


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    write_config(home)
    with Chat.open(home / "chat") as chat:
        for n in range(4):
            chat.append("user" if n % 2 == 0 else "ever", f"message {n} about the backups")
    return home


async def test_view_zoom_and_date_answer_as_the_tools_do(home: Path) -> None:
    async with client(home, AnthropicFake(script())) as (remote, _):
        view = await remote.request(GetView(), View)
        assert "message 3 about the backups" in view.text
        zoom = await remote.request(GetZoom(id=2, n=1), Zoom)
        assert zoom.text.startswith("2+1|") and "message 2" in zoom.text
        date = await remote.request(GetDate(id=0), Date)
        assert date.text
        with pytest.raises(RequestFailed, match="past the end of the chat") as past:
            await remote.request(GetZoom(id=8, n=8), Zoom)
        assert past.value.kind == "bad_request"
        with pytest.raises(RequestFailed, match="id must be between 0 and 3"):
            await remote.request(GetDate(id=99), Date)
        with pytest.raises(RequestFailed, match="id is a whole number"):
            await remote.request(GetDate(id="7"), Date)  # type: ignore[arg-type]  # as sent


async def test_append_logs_once_per_key_and_tells_every_window(home: Path) -> None:
    note = OutsideMessage(kind="note", text="decided in another agent: keep 8 rotations", key="n1")
    old = OutsideMessage(kind="user", text="imported", date="2024-03-01T09:30:00+00:00", key="i1")
    async with client(home, AnthropicFake(script())) as (remote, seen):
        first = await remote.request(Append(messages=[note]), Appended)
        assert first == Appended(ids=[4], skipped=0, rid=first.rid)
        again = await remote.request(Append(messages=[note, old]), Appended)
        assert (again.ids, again.skipped) == ([5], 1)
        with anyio.fail_after(5):
            while len([f for f in seen if isinstance(f, Recorded)]) < 2:
                await anyio.sleep(0.01)
        recorded = [f for f in seen if isinstance(f, Recorded)]
        assert recorded[0].kind == "note" and recorded[0].count == 1
        assert recorded[0].client.startswith("mcp ")
        with pytest.raises(RequestFailed, match="kind is one of"):
            work = OutsideMessage(kind="work", text="x")  # type: ignore[arg-type]  # as sent
            await remote.request(Append(messages=[work]), Appended)
        with pytest.raises(RequestFailed, match="has no time zone"):
            bad = OutsideMessage(kind="note", text="x", date="2024-03-01T09:30:00")
            await remote.request(Append(messages=[bad]), Appended)
    assert log_of(home)[4:] == [("note", note.text), ("user", "imported")]


async def test_append_does_not_wait_for_the_running_turn(home: Path) -> None:
    fake = AnthropicFake(script().push(slow(1.0, answer("Done."))))
    async with client(home, fake) as (remote, seen):
        await remote.request(Send(text="a question", key="q"), Accepted)
        with anyio.fail_after(10):
            while not any(isinstance(f, TurnStarted) for f in seen):
                await anyio.sleep(0.01)
        note = OutsideMessage(kind="note", text="x")
        done = await remote.request(Append(messages=[note]), Appended)
        assert done.ids == [5]  # at once, the turn still running
        with anyio.fail_after(10):
            while not any(isinstance(f, Quiet) for f in seen):
                await anyio.sleep(0.01)
