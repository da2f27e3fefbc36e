"""Clients that follow the log (the follower rule): a hello with `since` gets what was logged from
there (`missed`) before any event, then each new stretch of the log (`logged`) once the events
that showed it went out, and the messages a forget changed (`changed`)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TypeVar

import anyio
import pytest

from evertalk.chat import Chat
from evertalk.client.remote import Received, Remote, open_remote
from evertalk.protocol.events import MessageSent, ReplyLogged
from evertalk.protocol.replies import (
    Accepted,
    Changed,
    Forgotten,
    Logged,
    Missed,
    Reopened,
)
from evertalk.protocol.requests import Forget, Send
from fakes import AnthropicFake
from fakes import chat as answer
from tui.tui_support import fake_opener, hosted, script, write_config

pytestmark = pytest.mark.anyio

F = TypeVar("F")


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    write_config(home)
    with Chat.open(home / "chat") as chat:
        for n in range(6):
            chat.append("user" if n % 2 == 0 else "ever", f"message {n}")
    return home


class Follower:
    """A client that follows the log from `since`: every frame it got, in order."""

    def __init__(self, remote: Remote) -> None:
        self.remote = remote
        self.frames: list[Received] = []

    async def read(self) -> None:
        async for frame in self.remote.frames():
            self.frames.append(frame)

    def of(self, kind: type[F]) -> list[F]:
        return [frame for frame in self.frames if isinstance(frame, kind)]

    async def until(self, kind: type[F], count: int = 1) -> list[F]:
        with anyio.fail_after(15):
            while len(self.of(kind)) < count:
                await anyio.sleep(0.01)
        return self.of(kind)

    def position(self) -> int:
        """Where the log it was sent ends: the last `missed` or `logged`."""
        return [frame for frame in self.frames if isinstance(frame, Logged)][-1].t


@asynccontextmanager
async def followers(home: Path, fake: AnthropicFake, *since: int) -> AsyncIterator[list[Follower]]:
    async with hosted(home, fake_opener(home, fake)) as host:
        await (await host.connect()).aclose()
        found = [Follower(await open_remote(home, "app", start=False, since=n)) for n in since]
        async with anyio.create_task_group() as group:
            for follower in found:
                group.start_soon(follower.remote.run)
                group.start_soon(follower.read)
            try:
                yield found
            finally:
                for follower in found:
                    await follower.remote.aclose()


async def test_a_follower_gets_what_it_missed_then_what_is_logged(home: Path) -> None:
    fake = AnthropicFake(script().push(answer("Seven.")))
    async with followers(home, fake, 4) as (window,):
        (missed,) = await window.until(Missed)
        assert window.frames[0] is missed  # before any event
        assert (missed.t, missed.first) == (6, 4)
        assert [(r.id, r.text) for r in missed.records] == [(4, "message 4"), (5, "message 5")]
        assert not missed.unanswered and not missed.turning
        await window.remote.request(Send(text="message 6", key="six"), Accepted)
        await window.until(ReplyLogged)
        logged = await window.until(Logged, 2)
        await anyio.sleep(0.2)  # nothing more is logged
        stretches = [frame for frame in window.of(Logged) if not isinstance(frame, Missed)]
        # each stretch starts where the last ended, and comes after the events that showed it
        assert [s.first for s in stretches] == [6, *[s.t for s in stretches[:-1]]]
        assert [(r.id, r.kind, r.text) for s in stretches for r in s.records] == [
            (6, "user", "message 6"),
            (7, "ever", "Seven."),
        ]
        assert window.frames.index(window.of(ReplyLogged)[0]) < window.frames.index(logged[-1])
        assert window.position() == 8


async def test_a_client_without_since_gets_no_log(home: Path) -> None:
    fake = AnthropicFake(script().push(answer("Seven.")))
    async with followers(home, fake) as _, anyio.create_task_group() as group:
        remote = await open_remote(home, "other", start=False)
        plain = Follower(remote)
        group.start_soon(remote.run)
        group.start_soon(plain.read)
        await remote.request(Send(text="message 6", key="six"), Accepted)
        await plain.until(ReplyLogged)
        await plain.until(MessageSent)
        assert not plain.of(Logged)
        await remote.aclose()


async def test_a_follower_ahead_of_the_log_is_told_where_it_ends(home: Path) -> None:
    async with followers(home, AnthropicFake(script()), 9) as (window,):
        (missed,) = await window.until(Missed)
        assert (missed.t, missed.first, missed.records) == (6, 6, [])


async def test_a_forget_tells_every_follower_what_changed(home: Path) -> None:
    async with followers(home, AnthropicFake(script()), 6, 6) as windows:
        first = windows[0]
        done = await first.remote.request(Forget(range="2", reason="wrong"), Forgotten)
        assert done.messages == 1
        for window in windows:
            (changed,) = await window.until(Changed)
            ((record,),) = [changed.records]
            assert record.id == 2 and record.text.startswith("[forgotten on ")
            assert "message 2" not in record.text
            await window.until(Reopened)
            # the changes come before the chat says it is open again
            assert window.frames.index(changed) < window.frames.index(window.of(Reopened)[0])


@pytest.mark.parametrize(
    ("after", "offered"),
    [
        ([], True),  # a crash: the turn never ended
        ([("tool", 'shell {"command":"ls"}')], True),
        ([("echo", "turn stopped: the service stopped (signal SIGTERM)")], True),
        ([("echo", "turn stopped: cancelled by the user")], False),
        ([("echo", "turn stopped: the model call failed: overloaded")], False),
        ([("ever", "An answer.")], False),
    ],
)
async def test_a_message_left_unanswered_by_a_service_that_went_is_said(
    home: Path, after: list[tuple[str, str]], offered: bool
) -> None:
    with Chat.open(home / "chat") as chat:
        chat.append("user", "the question")
        for kind, text in after:
            chat.append(kind, text)
    async with followers(home, AnthropicFake(script()), 0) as (window,):
        (missed,) = await window.until(Missed)
        assert missed.unanswered is offered


async def test_a_window_that_missed_a_forget_is_told_when_it_comes_back(home: Path) -> None:
    async with followers(home, AnthropicFake(script()), 6) as (first,):
        (missed,) = await first.until(Missed)
        assert missed.edits == 0  # no message changed in place yet
        await first.remote.request(Forget(range="2", reason="wrong"), Forgotten)
        (changed,) = await first.until(Changed)
        assert changed.edits == 1
        await first.until(Reopened)
        # one window was away during the forget (it had applied none), one saw it
        away = Follower(await open_remote(home, "app", start=False, since=6, edits=0))
        saw = Follower(await open_remote(home, "app", start=False, since=6, edits=1))
        async with anyio.create_task_group() as group:
            for window in (away, saw):
                group.start_soon(window.remote.run)
                group.start_soon(window.read)
            (missed,) = await away.until(Missed)
            (changed,) = await away.until(Changed)
            assert missed.edits == 0  # not before it has the change itself
            assert [(r.id, r.text.startswith("[forgotten on ")) for r in changed.records] == [
                (2, True)
            ]
            assert changed.edits == 1
            (missed,) = await saw.until(Missed)
            assert missed.edits == 1
            await saw.remote.request(Send(text="and now?", key="now"), Accepted)
            await saw.until(ReplyLogged)
            assert not saw.of(Changed)
            for window in (away, saw):
                await window.remote.aclose()
