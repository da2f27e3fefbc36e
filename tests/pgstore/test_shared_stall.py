"""A service whose database goes silent (a relay that holds every byte): no database call runs on
its event loop, so a window's stream goes on while the listener, the compactor's claims, the
leases and the turn lock all wait for the database; once it answers again, the turn's reply is
logged."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import anyio
import pytest

from agent.test_turn_support import DAY_ONE, fixed_clock, workdir_beside, write_config
from evertalk.agent.session import Agent
from evertalk.pgstore import worker
from evertalk.protocol.events import TextDelta, TurnEnded
from evertalk.providers.base import Event, Finished, Request, Started, Text, TextDone, Usage
from evertalk.providers.base import TextDelta as Delta
from office_writer import keep_logging
from pg_server import PgServer

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # the checker's relay
from tests_chaos.proxy import Proxy

pytestmark = pytest.mark.anyio

STALL = 10.0
PACE = 0.02  # a delta every 20 ms, as a model streams


class Streams:
    """A model whose turn streams a word every PACE seconds until `done`; a compaction gets a
    line at once."""

    name = "anthropic"

    def __init__(self) -> None:
        self.streaming = anyio.Event()
        self.done = anyio.Event()

    async def stream(self, request: Request) -> AsyncIterator[Event]:
        yield Started()
        if request.tool_choice == "none":
            line = "notes on the detail words of a message"
            yield Delta(line)
            yield TextDone(line)
            yield Finished([Text(line)], "end_turn", Usage(10, 5), request.model)
            return
        self.streaming.set()
        words = 0
        while not self.done.is_set():
            yield Delta("word ")
            words += 1
            await anyio.sleep(PACE)
        text = "word " * words
        yield TextDone(text)
        yield Finished([Text(text)], "end_turn", Usage(10, 5), request.model)

    async def aclose(self) -> None:
        pass


@pytest.fixture
def relay(pg_server: PgServer) -> Iterator[Proxy]:
    proxy = Proxy(pg_server.port)
    yield proxy
    proxy.close()


async def test_a_window_streams_on_while_the_database_stalls(
    tmp_path: Path, pg_url: str, relay: Proxy
) -> None:
    home = tmp_path / "home"
    write_config(home, more=["", "[store]", f'url = "{relay.url(pg_url)}"'])
    model = Streams()
    stop = threading.Event()
    office = threading.Thread(target=keep_logging, args=(pg_url, tmp_path / "office", stop))
    deltas: list[float] = []
    ends: list[TurnEnded] = []
    worker.LOOP_CALLS.clear()
    async with Agent.open(
        home, asker=None, provider=model, workdir=workdir_beside(home), clock=fixed_clock(DAY_ONE)
    ) as agent:
        office.start()
        try:

            async def watch() -> None:  # the window: what it is sent, as it comes
                async for event in agent.events():
                    if isinstance(event, TextDelta):
                        deltas.append(time.monotonic())
                    elif isinstance(event, TurnEnded):
                        ends.append(event)

            async with anyio.create_task_group() as group:
                group.start_soon(watch)
                agent.submit("tell me about the notes")
                with anyio.fail_after(20):
                    await model.streaming.wait()
                await anyio.sleep(1.0)  # the office's notes are folded, the compactor works
                healed: list[float] = []

                def heal() -> None:  # in a thread: a loop that waited would not get to it
                    healed.append(time.monotonic())
                    relay.heal()

                healer = threading.Timer(STALL, heal)
                relay.stall()
                stalled = time.monotonic()
                healer.start()
                await anyio.to_thread.run_sync(healer.join)
                model.done.set()
                with anyio.fail_after(30):
                    while not ends:
                        await anyio.sleep(0.05)
                group.cancel_scope.cancel()
        finally:
            relay.heal()
            stop.set()
            await anyio.to_thread.run_sync(office.join)
    # a loop that waited for the database would send nothing until the heal; how evenly the
    # deltas come meanwhile is a figure of bench/stall_bench.py
    assert [t for t in deltas if stalled < t < healed[0]], "no delta while the database was silent"
    assert [end.reason for end in ends] == ["done"]
    assert worker.LOOP_CALLS == []
