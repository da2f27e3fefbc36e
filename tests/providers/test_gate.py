"""The prefix gate (SPEC §4.6): a call waits only on a prefix that is not written yet while an
earlier call in flight is writing it; a written prefix never makes a call wait."""

from __future__ import annotations

import anyio
import pytest

from evertalk.providers.anthropic import AnthropicProvider
from evertalk.providers.base import Request, collect
from evertalk.providers.gate import CACHE_LIFETIME, Flight, GatedProvider, PrefixGate
from evertalk.providers.layout import compaction_request, prefix_keys
from fakes import IN_PROCESS_URL, AnthropicFake, FakeClock, InFlight, async_client, chat, slow

pytestmark = pytest.mark.anyio


async def entered(gate: PrefixGate, keys: list[str]) -> Flight:
    """Enter without waiting: the test fails if the gate holds the call."""
    with anyio.fail_after(1):
        return await gate.enter(keys)


class Waiting:
    """A call started in a task group that enters the gate; `flight` is set once it is let in."""

    def __init__(self, gate: PrefixGate, keys: list[str]) -> None:
        self.gate = gate
        self.keys = keys
        self.flight: Flight | None = None
        self.let_in = anyio.Event()

    async def __call__(self) -> None:
        self.flight = await self.gate.enter(self.keys)
        self.let_in.set()


async def settled() -> None:
    """Give every ready task its turn (a waiter that could pass has passed after this)."""
    for _ in range(10):
        await anyio.sleep(0)


# -- the rule ---------------------------------------------------------------------------------


async def test_second_call_on_an_unwritten_prefix_waits_until_the_first_response_starts() -> None:
    gate = PrefixGate()
    first = await entered(gate, ["m|A"])
    second = Waiting(gate, ["m|A"])
    async with anyio.create_task_group() as group:
        group.start_soon(second)
        await settled()
        assert second.flight is None  # the first response has not begun
        first.started()
        with anyio.fail_after(1):
            await second.let_in.wait()
    assert gate.is_written("m|A") and gate.pending() == 0


async def test_a_written_prefix_never_makes_a_call_wait() -> None:
    gate = PrefixGate()
    writer = await entered(gate, ["m|system"])
    writer.started()
    writer.ended()
    # eight calls on the written system prompt, each with its own new end: all in at once,
    # and each the writer of its own end (none of them has a response yet)
    flights = [await entered(gate, ["m|system", f"m|end{n}"]) for n in range(8)]
    assert gate.pending() == 8
    for flight in flights:
        flight.ended()
    assert gate.pending() == 0


async def test_a_call_waits_only_for_the_unwritten_prefix_an_earlier_call_is_writing() -> None:
    gate = PrefixGate()
    (await entered(gate, ["m|S"])).started()
    first = await entered(gate, ["m|S", "m|B", "m|E1"])  # writes B and E1
    same_context = Waiting(gate, ["m|S", "m|B", "m|E2"])
    other_context = await entered(gate, ["m|S", "m|C", "m|E3"])  # S is written: no wait
    async with anyio.create_task_group() as group:
        group.start_soon(same_context)
        await settled()
        assert same_context.flight is None  # B is being written by `first`
        first.started()
        with anyio.fail_after(1):
            await same_context.let_in.wait()
    assert gate.pending() == 3  # C, E3 (other_context) and E2 (same_context)
    other_context.ended()
    assert same_context.flight is not None
    same_context.flight.ended()
    assert gate.pending() == 0


async def test_a_writer_that_ends_without_a_response_hands_the_prefix_to_one_waiter() -> None:
    gate = PrefixGate()
    failed = await entered(gate, ["m|A"])
    waiters = [Waiting(gate, ["m|A", f"m|end{n}"]) for n in range(3)]
    async with anyio.create_task_group() as group:
        for waiter in waiters:
            group.start_soon(waiter)
        await settled()
        failed.ended()  # e.g. the call failed before its response began: A is not written
        await settled()
        # one waiter went ahead as A's new writer; the others wait for its response
        let_in = [waiter for waiter in waiters if waiter.flight is not None]
        assert len(let_in) == 1
        assert not gate.is_written("m|A") and gate.pending() == 2  # A and its own end
        assert let_in[0].flight is not None
        let_in[0].flight.started()
        with anyio.fail_after(1):
            for waiter in waiters:
                await waiter.let_in.wait()
    assert gate.is_written("m|A")


async def test_a_prefix_stays_written_five_minutes_after_its_last_use() -> None:
    clock = FakeClock()
    gate = PrefixGate(clock=clock)
    (await entered(gate, ["m|S"])).started()
    clock.advance(CACHE_LIFETIME - 1)
    reader = await entered(gate, ["m|S"])  # still written: no wait, and no claim
    assert gate.pending() == 0
    reader.started()  # a use: the lifetime starts again from here
    clock.advance(CACHE_LIFETIME - 1)
    assert gate.is_written("m|S")
    clock.advance(1)
    assert not gate.is_written("m|S")  # the entry is gone: the next call writes it again
    rewriter = await entered(gate, ["m|S"])
    waiter = Waiting(gate, ["m|S"])
    async with anyio.create_task_group() as group:
        group.start_soon(waiter)
        await settled()
        assert waiter.flight is None
        rewriter.started()
    assert gate.is_written("m|S")


async def test_expired_prefixes_are_forgotten() -> None:
    clock = FakeClock()
    gate = PrefixGate(clock=clock)
    for n in range(100):
        (await entered(gate, [f"m|end{n}"])).started()
    assert gate.remembered() == 100
    clock.advance(CACHE_LIFETIME)
    (await entered(gate, ["m|new"])).started()
    assert gate.remembered() == 1  # a long session does not keep every request's end


async def test_different_prefixes_do_not_wait() -> None:
    gate = PrefixGate()
    await entered(gate, ["model|A"])
    flight = await entered(gate, ["model|B", "other-model|A"])
    flight.ended()
    assert gate.pending() == 1


async def test_cancelled_waiter_claims_nothing() -> None:
    gate = PrefixGate()
    writer = await entered(gate, ["k"])
    with anyio.move_on_after(0.05):
        await gate.enter(["k", "mine"])
    writer.ended()
    assert gate.pending() == 0


# -- through the provider, against the fake ---------------------------------------------------

DELAY = 1.0  # seconds before each response starts
MODEL = "claude-haiku-4-5"
SYSTEM = "You are Ever, and this is the system prompt the compactions share. " * 80


def compaction(n: int) -> Request:
    """Compaction n: the shared system prompt, then a context and a task of its own."""
    context = "\n".join(["<chat>", *(f"{k}+1|line {k} of chat {n}" for k in range(12)), "</chat>"])
    return compaction_request(MODEL, SYSTEM, [], context, f"Compaction: task {n}", [], 1_000)


async def test_eight_calls_fly_together_once_the_shared_prefix_is_written() -> None:
    fake = AnthropicFake(slow(DELAY, chat("a line")), ping=False)
    counter = InFlight(fake)
    inner = AnthropicProvider("test-key", IN_PROCESS_URL, http_client=async_client(counter))
    provider = GatedProvider(inner, PrefixGate(), prefix_keys)
    try:
        await collect(provider, compaction(0))  # writes the system prompt's entry
        assert fake.records[0].cache_write > 0
        async with anyio.create_task_group() as group:
            for n in range(1, 9):
                group.start_soon(collect, provider, compaction(n))
    finally:
        await provider.aclose()
    assert counter.peak == 8  # all eight were at the model at once (the time: make bench)
    later = fake.records[1:]
    assert len(later) == 8 and all(record.cache_read > 0 for record in later)
