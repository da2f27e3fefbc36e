"""A service's part in a shared chat (`agent/sharing.py`), on a real server: the leases of its
calls renewed whatever its listener does, and turns fenced, so that a machine whose database
session was dropped mid-turn logs nothing after another machine's turn, and answers its message
once it holds the turn again."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from datetime import datetime
from pathlib import Path

import anyio
import psycopg
import pytest

from agent.test_turn_support import DAY_ONE, fixed_clock, workdir_beside, write_config
from evertalk.agent.lost_turn import LOST_LOCK
from evertalk.agent.session import Agent
from evertalk.agent.sharing import Sharing
from evertalk.compactor.service import Compactor, CompactorSettings
from evertalk.pgstore.session import PgSession
from evertalk.protocol.events import AgentEvent, MemoryWarning, TurnEnded
from evertalk.providers.base import Event, Request
from evertalk.shared_chat import SharedChat, machine_name
from fakes.scripted_provider import ScriptedProvider, Step, says


class Waits:
    """A provider whose first call waits for the test's word (`go`) before it gives `first`
    (cancelled meanwhile, it gives nothing); the later calls get the `rest`, at once."""

    name = "anthropic"

    def __init__(self, first: Step, *rest: Step) -> None:
        self.first = ScriptedProvider(first)
        self.rest = ScriptedProvider(*rest)
        self.called = anyio.Event()
        self.go = anyio.Event()

    async def stream(self, request: Request) -> AsyncIterator[Event]:
        script = self.rest
        if not self.called.is_set():
            self.called.set()
            await self.go.wait()
            script = self.first
        async for event in script.stream(request):
            yield event

    async def aclose(self) -> None:
        await self.rest.aclose()


def nowhere() -> str:
    """The URL of a port where no server listens."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"postgresql://postgres:x@127.0.0.1:{port}/nothing"


def lease_expiry(url: str) -> datetime | None:
    with psycopg.connect(url) as conn:
        row = conn.execute("SELECT expires FROM evertalk.leases").fetchone()
    return row[0] if row is not None else None


@pytest.mark.anyio
async def test_leases_are_renewed_while_the_listener_cannot_connect(
    pg_url: str, tmp_path: Path
) -> None:
    chat = SharedChat.open_shared(PgSession(pg_url, "home"), tmp_path / "chat", lease_seconds=1.5)
    model = Waits(says("a line about it"))
    settings = CompactorSettings(model="m", effort=None)
    compactor = Compactor(chat, model, settings, system="You summarize.", tools=[])
    warnings: list[str] = []
    # its listener waits ever longer to connect again; the lease must not lapse meanwhile
    sharing = Sharing(chat, nowhere(), compactor, lambda logged: None, warnings.append)
    try:
        chat.append("user", "a message long enough to need a model's line " * 40)
        async with anyio.create_task_group() as group:
            group.start_soon(compactor.run)
            with anyio.fail_after(10):
                await model.called.wait()
            claimed = lease_expiry(pg_url)
            assert claimed is not None
            group.start_soon(sharing.follow)
            with anyio.fail_after(10):
                while (expiry := lease_expiry(pg_url)) is None or (
                    (expiry - claimed).total_seconds() < 2
                ):
                    await anyio.sleep(0.05)  # renewed several times, past when it would lapse
            assert warnings and "cannot reach the database" in warnings[0]
            group.cancel_scope.cancel()
    finally:
        sharing.close()
        chat.close()


class Events:
    """What an agent tells its windows, kept as it comes."""

    def __init__(self, agent: Agent) -> None:
        self.agent = agent
        self.seen: list[AgentEvent] = []
        self._more = anyio.Event()

    async def collect(self) -> None:
        async for event in self.agent.events():
            self.seen.append(event)
            self._more.set()
            self._more = anyio.Event()

    def ends(self) -> list[TurnEnded]:
        return [event for event in self.seen if isinstance(event, TurnEnded)]

    async def turns_ended(self, count: int) -> list[TurnEnded]:
        with anyio.fail_after(30):
            while len(self.ends()) < count:
                await self._more.wait()
        return self.ends()


@pytest.fixture
def homes(tmp_path: Path, pg_url: str) -> Iterator[tuple[Path, Path]]:
    pair = (tmp_path / "home", tmp_path / "office")
    for home in pair:
        write_config(home, more=["", "[store]", f'url = "{pg_url}"'])
    yield pair


@asynccontextmanager
async def running(home: Path, model: Waits | ScriptedProvider) -> AsyncIterator[Events]:
    async with (
        Agent.open(
            home,
            asker=None,
            provider=model,
            workdir=workdir_beside(home),
            clock=fixed_clock(DAY_ONE),
        ) as agent,
        anyio.create_task_group() as group,
    ):
        events = Events(agent)
        group.start_soon(events.collect)
        yield events
        group.cancel_scope.cancel()


def drop_turn_session(url: str, home: Path) -> None:
    """End the database session that holds `home`'s turn lock, as a laptop's closed lid does."""
    with psycopg.connect(url, autocommit=True) as conn:
        ended = conn.execute(
            "SELECT pg_terminate_backend(pid, 10000) FROM evertalk.turns"
            " WHERE machine = %s AND pid IN (SELECT pid FROM pg_stat_activity)",
            (machine_name(home),),
        ).fetchall()
    assert ended == [(True,)]


def logged(url: str) -> list[tuple[int, str, str]]:
    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT id, kind, text FROM evertalk.messages ORDER BY id")
        return [(int(i), str(kind), str(text)) for i, kind, text in rows]


STOPPED = f"turn stopped: {LOST_LOCK}"


@pytest.mark.anyio
async def test_a_turn_whose_lock_was_taken_since_logs_nothing_and_runs_again(
    homes: tuple[Path, Path], pg_url: str
) -> None:
    home, office = homes
    home_model = Waits(says("home's late answer"), says("home's answer"))
    async with (
        running(home, home_model) as at_home,
        running(office, ScriptedProvider(says("office's answer"))) as at_office,
    ):
        assert at_home.agent.sharing is not None
        at_home.agent.sharing.watch_seconds = 3600  # the database's refusal alone tells it
        at_home.agent.submit("home's question")
        with anyio.fail_after(10):
            await home_model.called.wait()
        drop_turn_session(pg_url, home)
        at_office.agent.submit("office's question")
        assert [end.reason for end in await at_office.turns_ended(1)] == ["done"]
        home_model.go.set()  # home's reply comes after office's turn: refused
        ends = await at_home.turns_ended(2)
        assert [end.reason for end in ends] == ["cancelled", "done"]
        warned = [e.text for e in at_home.seen if isinstance(e, MemoryWarning)]
        assert any(LOST_LOCK in line and "runs again" in line for line in warned), warned
    assert logged(pg_url) == [
        (0, "user", "home's question"),
        (1, "user", "office's question"),
        (2, "ever", "office's answer"),
        (3, "echo", STOPPED),
        (4, "ever", "home's answer"),
    ]


@pytest.mark.anyio
async def test_a_turn_that_lost_its_lock_is_stopped_by_its_watcher_and_runs_again(
    homes: tuple[Path, Path], pg_url: str
) -> None:
    home, _ = homes
    home_model = Waits(says("never sent"), says("home's answer"))
    async with running(home, home_model) as at_home:
        assert at_home.agent.sharing is not None
        at_home.agent.sharing.watch_seconds = 0.1
        at_home.agent.submit("home's question")
        with anyio.fail_after(10):
            await home_model.called.wait()
        drop_turn_session(pg_url, home)  # the model never answers that call: it is cancelled
        ends = await at_home.turns_ended(2)
        assert [end.reason for end in ends] == ["cancelled", "done"]
    assert logged(pg_url) == [
        (0, "user", "home's question"),
        (1, "echo", STOPPED),  # logged at once (no other machine had the turn): not twice
        (2, "ever", "home's answer"),
    ]
