"""The app shows the log's last messages before its service answers (issue 10: the first
screen), read from the files; the service's own reply keeps them when they agree and replaces
them when the log moved on meanwhile; a message sent before the connection waits for it."""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest
from textual.pilot import Pilot
from tui_support import (
    SIZE,
    enter_line,
    fake_opener,
    hosted,
    log_of,
    script,
    wait_until,
    workdir_of,
)

from evertalk.chat import Chat
from evertalk.client.remote import Message, Remote
from evertalk.tui.app import ChatApp
from evertalk.tui.history import log_tail
from evertalk.tui.widgets import NoteRow, ReplyView, UserRow
from fakes import AnthropicFake

pytestmark = pytest.mark.anyio


def some_chat(home: Path, turns: int) -> None:
    with Chat.open(home / "chat") as chat:
        for turn in range(turns):
            chat.append("user", f"question {turn}")
            words = "in words " * (9_000 if turn == 3 else 5)  # turn 3's reply in 3 pages
            chat.append("ever", f"Answer {turn}, {words}", key=f"reply-{turn}")


@asynccontextmanager
async def gated(
    home: Path, fake: AnthropicFake, tail: Sequence[Message]
) -> AsyncIterator[tuple[Pilot[int], anyio.Event]]:
    """The app on `tail`, whose connection to the service waits until the event is set."""
    gate = anyio.Event()
    async with hosted(home, fake_opener(home, fake)) as host:

        async def connector(*, since: int | None, start: bool, edits: int | None = None) -> Remote:
            await gate.wait()
            return await host.connect(since=since, start=start, edits=edits)

        app = ChatApp(home, connector=connector, workdir=workdir_of(home), tail=tail)
        async with app.run_test(size=SIZE) as pilot:
            await pilot.pause()
            yield pilot, gate


def questions(app: ChatApp) -> list[str]:
    return [row.text for row in app.query(UserRow)]


async def test_the_last_messages_show_before_the_service_and_stay(home: Path) -> None:
    some_chat(home, 6)
    tail = log_tail(home / "chat")
    assert [m.i for m in tail] == list(range(14))  # the whole chat: turn 3's reply is 3 pages
    async with gated(home, AnthropicFake(script()), tail) as (pilot, gate):
        app = pilot.app
        assert isinstance(app, ChatApp)
        assert app.remote is None
        assert questions(app) == [f"question {turn}" for turn in range(3, 6)]
        assert "Answer 3, in words" in app.query(ReplyView)[0].source  # its pages joined
        assert app.query(NoteRow).first().text.startswith("14 messages in this chat")
        assert "connecting to the service" in str(app.status_bar.render())
        shown = list(app.chat_log.children)

        gate.set()
        with anyio.fail_after(20):
            await app.ready.wait()
        await pilot.pause()
        assert list(app.chat_log.children) == shown  # the same rows: nothing drawn twice


async def test_what_was_logged_after_the_files_were_read_follows_the_rows(home: Path) -> None:
    some_chat(home, 6)
    tail = log_tail(home / "chat")
    with Chat.open(home / "chat") as chat:  # after the files were read, before the service
        chat.append("user", "question late")
    async with gated(home, AnthropicFake(script()), tail) as (pilot, gate):
        app = pilot.app
        assert isinstance(app, ChatApp)
        before = list(app.chat_log.children)
        assert "question late" not in questions(app)

        gate.set()
        with anyio.fail_after(20):
            await app.ready.wait()
        await pilot.pause()
        assert questions(app)[-2:] == ["question 5", "question late"]
        assert len(questions(app)) == len(set(questions(app)))
        assert all(row.is_attached for row in before)  # they agree with the log: they stay
        intros = [row for row in app.query(NoteRow) if "messages in this chat" in row.text]
        assert len(intros) == 1 and intros[0].text.startswith("15 messages in this chat")


async def test_a_message_sent_before_the_connection_waits_for_it(home: Path) -> None:
    some_chat(home, 2)
    async with gated(home, AnthropicFake(script()), log_tail(home / "chat")) as (pilot, gate):
        app = pilot.app
        assert isinstance(app, ChatApp)
        await enter_line(pilot, "typed at once")
        await pilot.pause(0.1)
        assert app.remote is None
        gate.set()
        await wait_until(pilot, lambda: ("user", "typed at once") in log_of(home))
        await wait_until(pilot, lambda: not app.busy)
        assert [text for kind, text in log_of(home) if kind == "user"].count("typed at once") == 1
        assert not [row for row in app.query(NoteRow) if row.text.startswith("not sent")]
