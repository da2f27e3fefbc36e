"""Turns first on a server that serves one request at a time (`providers/lane.py`, SPEC §4.1).

The lane alone, then the compactor and a turn's calls against the OpenAI-compatible fake taught
llama-cpp-python's way (a stream stops when a newer request arrives), then a whole session
configured for a local server."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest
from test_service import LONG, compactor_for, one_message_chat, until

from evertalk.agent.session import Agent
from evertalk.chat import Chat
from evertalk.compactor.service import Compactor
from evertalk.ledger import Ledger, ledger_path, read_records
from evertalk.protocol.events import MemoryWarning, TurnEnded
from evertalk.providers.base import Event, Message, Provider, Request, Text, collect
from evertalk.providers.lane import TurnLane, TurnsFirst, Yielded, turns_first
from fakes import (
    Call,
    OpenAIFake,
    Script,
    interrupted_by_next,
    slow,
    summarizer,
)
from fakes import chat as answer
from fakes.sdk_providers import provider_for

pytestmark = pytest.mark.anyio

PACE = 0.02  # seconds between streamed chunks: a reply streams for a good part of a second


def is_compaction(call: Call) -> bool:
    return call.body.get("tool_choice") == "none"


def local_server(turn_reply: str = "The turn's answer, streamed slowly. " * 8) -> OpenAIFake:
    """A llama-cpp-python-like server: every stream stops when a newer request arrives."""
    summaries = interrupted_by_next(slow(0.0, summarizer(200), chunk_delay=PACE))
    turns = interrupted_by_next(slow(0.0, answer(turn_reply), chunk_delay=PACE))
    return OpenAIFake(Script(turns).route(is_compaction, summaries), text_chunk=8)


def turn_request() -> Request:
    return Request(
        model="smol",
        system=[Text("You are Ever.")],
        tools=[],
        messages=[Message("user", [Text("Turn: hello")])],
        max_tokens=200,
    )


# -- the lane alone -----------------------------------------------------------------------------


async def test_a_compaction_does_not_start_while_a_turn_call_streams() -> None:
    lane = TurnLane()
    order: list[str] = []

    async def compaction() -> None:
        async with lane.compaction():
            order.append("compaction")

    async with anyio.create_task_group() as group, lane.turn():
        group.start_soon(compaction)
        await anyio.wait_all_tasks_blocked()
        assert lane.busy and order == []
        order.append("turn")
    assert order == ["turn", "compaction"] and not lane.busy


async def test_a_turn_call_cancels_the_compaction_in_flight() -> None:
    lane = TurnLane()
    inside = anyio.Event()
    outcome: list[str] = []

    async def compaction() -> None:
        try:
            async with lane.compaction():
                inside.set()
                await anyio.sleep_forever()
        except Yielded:
            outcome.append("yielded")

    async with anyio.create_task_group() as group:
        group.start_soon(compaction)
        await inside.wait()
        async with lane.turn():
            # the turn's call goes out only once the compaction is gone
            assert outcome == ["yielded"]
    assert lane.yielded == 1


async def test_the_lane_clears_when_the_last_turn_call_ends() -> None:
    """A turn's and a subagent's calls overlap: compactions wait for both."""
    lane = TurnLane()
    started = anyio.Event()

    async def compaction() -> None:
        async with lane.compaction():
            started.set()

    async with anyio.create_task_group() as group:
        async with lane.turn():
            async with lane.turn():
                group.start_soon(compaction)
            await anyio.wait_all_tasks_blocked()
            assert not started.is_set()
        await started.wait()


async def test_without_a_lane_the_provider_is_left_as_it_is() -> None:
    fake = OpenAIFake(answer("hi"))
    provider = provider_for(fake, kind="llamacpp", key="local")
    try:
        assert turns_first(provider, None) is provider
        wrapped = turns_first(provider, TurnLane())
        assert isinstance(wrapped, TurnsFirst) and wrapped.name == "llamacpp"
        assert (await collect(wrapped, turn_request())).text == "hi"
    finally:
        await provider.aclose()


# -- the compactor and a turn on one local server -----------------------------------------------


class Answered:
    """The compactor's provider, with an event set once a call's response has begun: its first
    event is out of the stream, and the compactor has it (the generator runs in its task)."""

    def __init__(self, inner: Provider) -> None:
        self.inner = inner
        self.name = inner.name
        self.begun = anyio.Event()

    async def stream(self, request: Request) -> AsyncIterator[Event]:
        async for event in self.inner.stream(request):
            self.begun.set()
            yield event

    async def aclose(self) -> None:
        await self.inner.aclose()


@asynccontextmanager
async def compacting(chat: Chat, provider: Provider, lane: TurnLane) -> AsyncIterator[Compactor]:
    ledger = Ledger(ledger_path(chat.store.path.parent))
    warnings: list[str] = []
    compactor = compactor_for(chat, provider, ledger=ledger, warn=warnings.append, concurrency=1)
    compactor.lane = lane
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(compactor.run)
            yield compactor
            await until(lambda: chat.core.tree.is_built((0, 0)))
            group.cancel_scope.cancel()
        assert warnings == [] and compactor.failed_at == {} and chat.core.failures == {}
        assert compactor.built == 1
    finally:
        ledger.close()


async def test_a_turn_call_takes_the_server_from_a_compaction(home: Path) -> None:
    """The compaction in flight when a turn's call starts is cancelled before the turn's request
    goes out, and sent again once the turn's call is over: the turn is never cut off, and the
    node has no failure."""
    fake = local_server()
    provider = provider_for(fake, kind="llamacpp", key="local")
    lane = TurnLane()
    chat = one_message_chat(home)
    answered = Answered(provider)
    try:
        async with compacting(chat, answered, lane):
            await answered.begun.wait()  # the response has begun: a call, should it be cut
            reply = await collect(TurnsFirst(provider, lane), turn_request())
            assert reply.stop == "end_turn" and reply.text.startswith("The turn's answer")
        compactions = [r for r in fake.records if r.body and r.body.get("tool_choice")]
        turn = [r for r in fake.records if r.body and not r.body.get("tool_choice")]
        assert len(compactions) == 2 and len(turn) == 1
        assert not turn[0].interrupted and turn[0].finished
        assert compactions[0].index < turn[0].index < compactions[1].index
        assert compactions[1].finished and not compactions[1].interrupted
        assert lane.yielded == 1
        records = read_records(ledger_path(home)).records
        assert [r.failed for r in records] == [True, False]  # the cut-off one was a call too
    finally:
        chat.close()
        await provider.aclose()


async def test_no_compaction_reaches_the_server_while_a_turn_call_streams(home: Path) -> None:
    fake = local_server()
    provider = provider_for(fake, kind="llamacpp", key="local")
    lane = TurnLane()
    chat = one_message_chat(home)
    release = anyio.Event()

    async def turn_call() -> None:  # a turn's call that streams until released
        async with lane.turn():
            await release.wait()

    try:
        async with anyio.create_task_group() as group:
            group.start_soon(turn_call)
            await anyio.wait_all_tasks_blocked()
            async with compacting(chat, provider, lane) as compactor:
                await until(lambda: bool(compactor.in_flight))  # the compaction has begun
                await anyio.wait_all_tasks_blocked()  # and can go no further: at the lane
                assert fake.records == []
                release.set()
        assert len(fake.records) == 1 and fake.records[0].finished
    finally:
        chat.close()
        await provider.aclose()


# -- a session on a local server ----------------------------------------------------------------


def local_home(home: Path) -> None:
    (home / "config.toml").write_text(
        'provider = "llamacpp"\nmodel = "smol"\n\n[memory]\nsettle_timeout = 0\n'
    )
    with Chat.open(home / "chat") as chat:
        chat.append("user", LONG[6:])  # its leaf needs a model call: in flight at the first turn


async def test_a_session_on_a_local_server_lets_its_turns_go_first(home: Path) -> None:
    """llama-cpp-python's server: without the lane, the turn's request cut the compaction off
    (a failure, and a warning), and the compaction's retry, at the message the turn logged, cut
    the turn's reply short."""
    local_home(home)
    fake = local_server()
    provider = provider_for(fake, kind="llamacpp", key="local")
    seen: list[object] = []
    try:
        async with Agent.open(home, asker=None, provider=provider) as agent:
            assert agent.compactor.settings.concurrency == 1
            await until(lambda: bool(fake.records) and fake.records[0].started)
            agent.submit("hello")
            with anyio.fail_after(30):
                async for event in agent.events():
                    seen.append(event)
                    if isinstance(event, TurnEnded):
                        break
            await until(lambda: all(agent.chat.core.tree.is_built((0, i)) for i in range(3)))
            assert agent.compactor.failed_at == {} and agent.chat.core.failures == {}
            lane = agent.compactor.lane
            assert lane is not None and lane.yielded >= 1
        ended = [event for event in seen if isinstance(event, TurnEnded)]
        assert [event.reason for event in ended] == ["done"]
        assert not [event for event in seen if isinstance(event, MemoryWarning)]
        turns = [r for r in fake.records if r.body and r.body.get("tool_choice") != "none"]
        assert turns and not any(record.interrupted for record in turns)
    finally:
        await provider.aclose()
