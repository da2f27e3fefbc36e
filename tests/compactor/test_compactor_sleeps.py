"""A compactor that cannot start anything sleeps (SPEC §4.5, §11): until a message, a call that
lands, its retry timer or its next probe. It never goes round its loop without waiting, and it
says whether a call could start, which is what keeps a service from exiting when idle.

How much the loop works is counted, not timed: `Compactor.rounds` goes up once per time round
its loop. The test then gives the event loop a few hundred turns; a loop that sleeps goes round
at most a few times in them (a landing, a status write), one that polls goes round at each.

As in test_service.py: a real Chat on disk and the real AnthropicProvider over the in-process
fake; a FakeClock stands for the time that passes.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import anyio
import anyio.lowlevel
import pytest
from test_service import compactor_for, compactor_provider, failed, until
from test_service_failures import long_chat

from evertalk.compactor.policy import PROBE_MOST, RETRY_SECONDS
from evertalk.compactor.service import Compactor
from fakes import AnthropicFake, Call, Fail, FakeClock, Script, constant, slow, summarizer

pytestmark = pytest.mark.anyio

NEVER = 3600.0  # seconds: a call that does not end while a test runs
TURNS = 300  # turns of the event loop in which a compactor that sleeps goes round at most ROUNDS
ROUNDS = 5


async def rounds_in_a_while(compactor: Compactor) -> int:
    """How many times the compactor's loop went round while the event loop turned TURNS times."""
    before = compactor.rounds
    for _ in range(TURNS):
        await anyio.lowlevel.checkpoint()
    return compactor.rounds - before


def of_message(k: int) -> Callable[[Call], bool]:
    """Whether a call summarizes message k of `long_chat` (its text starts `m{k} `)."""
    return lambda call: call.input_text.startswith(f"user: m{k} ")


async def waits_on(compactor: Compactor) -> None:
    """Waits for summaries as a turn does, until cancelled."""
    with compactor.waiting():
        await anyio.sleep_forever()


# -- 1. it sleeps ------------------------------------------------------------------------------


async def test_a_failed_node_whose_slot_is_taken_sleeps_while_a_turn_waits(home: Path) -> None:
    """A local server of one slot: message 0's summary failed, message 1's runs. A turn waits
    and the failed node's 10 s are over, but it cannot start until the slot frees."""
    clock = FakeClock()
    script = Script(slow(NEVER, summarizer(300))).route(of_message(0), Fail(500))
    chat = long_chat(home, 2)
    compactor = compactor_for(
        chat, compactor_provider(AnthropicFake(script)), clock=clock, concurrency=1
    )
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(waits_on, compactor)
            group.start_soon(compactor.run)
            await until(failed(chat, (0, 0), 1))
            await until(lambda: compactor.in_flight == {(0, 1)})
            clock.advance(RETRY_SECONDS + 1)
            compactor.wake()
            assert await rounds_in_a_while(compactor) <= ROUNDS
            assert compactor.in_flight == {(0, 1)} and (0, 0) in compactor.failed_at
            group.cancel_scope.cancel()
    finally:
        chat.close()


@pytest.mark.parametrize("waited_on", [False, True], ids=["alone", "while-a-turn-waits"])
async def test_a_paused_compactor_sleeps_between_its_probes(home: Path, waited_on: bool) -> None:
    """A refused key pauses the compactor with every ready node held. It sleeps until its next
    probe, which takes a held node (none is at fault), and while a probe runs, until it lands;
    a turn's wait changes neither (failed nodes' 10 s do not apply while paused)."""
    clock = FakeClock()

    def refused(call: Call) -> Fail:  # the ninth call on (the second probe) hangs
        return Fail(401, message="invalid x-api-key", delay=NEVER if call.index >= 9 else 0.0)

    fake = AnthropicFake(refused)
    chat = long_chat(home, 8)  # eight leaves ready
    warnings: list[str] = []
    compactor = compactor_for(chat, compactor_provider(fake), clock=clock, warn=warnings.append)
    try:
        async with anyio.create_task_group() as group:
            if waited_on:
                group.start_soon(waits_on, compactor)
            group.start_soon(compactor.run)
            await until(lambda: bool(warnings) and not compactor.in_flight)
            assert len(compactor.failed_at) == 8 and compactor.setup_error is not None
            clock.advance(PROBE_MOST)  # the next probe is due; a failed node's retry would be
            compactor.wake()
            assert await rounds_in_a_while(compactor) <= ROUNDS
            await until(lambda: len(fake.records) == 9 and not compactor.in_flight)  # a probe
            clock.advance(PROBE_MOST)
            compactor.wake()
            await until(lambda: len(fake.records) == 10)  # the next probe, which hangs
            clock.advance(NEVER)
            compactor.wake()
            assert await rounds_in_a_while(compactor) <= ROUNDS
            assert len(compactor.in_flight) == 1 and len(fake.records) == 10
            group.cancel_scope.cancel()
        assert chat.core.failures == {} and len(warnings) == 1
    finally:
        chat.close()


async def test_failed_nodes_sleep_until_a_message_when_nobody_waits(home: Path) -> None:
    clock = FakeClock()
    fake = AnthropicFake(constant(Fail(500)))
    chat = long_chat(home, 2)
    compactor = compactor_for(chat, compactor_provider(fake), clock=clock)
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(compactor.run)
            await until(lambda: len(compactor.failed_at) == 2 and not compactor.in_flight)
            clock.advance(NEVER)
            compactor.wake()
            assert await rounds_in_a_while(compactor) <= ROUNDS
            assert len(compactor.failed_at) == 2
            group.cancel_scope.cancel()
    finally:
        chat.close()


# -- 2. whether a call can start (what keeps a service from going idle) --------------------------


async def test_only_a_call_that_can_start_is_work(home: Path) -> None:
    """Nine leaves: the first eight fail, and the ninth is behind the leaf window. None counts
    as work while they wait for a message; the message makes them work again."""
    clock = FakeClock()
    script = Script(summarizer(300))
    for k in range(8):
        script.route(of_message(k), Fail(500))
    chat = long_chat(home, 9)
    compactor = compactor_for(chat, compactor_provider(AnthropicFake(script)), clock=clock)
    try:
        assert compactor.can_start()  # eight leaves ready, nothing run yet
        async with anyio.create_task_group() as group:
            group.start_soon(compactor.run)
            await until(lambda: len(compactor.failed_at) == 8 and not compactor.in_flight)
            assert not compactor.can_start()
            assert compactor.status().queued == 1  # the ninth: waiting, but it cannot start
            clock.advance(NEVER)
            assert not compactor.can_start()  # nobody waits: no timer retries them
            compactor.message_logged()
            assert compactor.can_start()
            group.cancel_scope.cancel()
    finally:
        chat.close()


async def test_a_paused_compactor_is_not_work(home: Path) -> None:
    fake = AnthropicFake(constant(Fail(401, message="invalid x-api-key")))
    chat = long_chat(home, 3)
    warnings: list[str] = []
    compactor = compactor_for(chat, compactor_provider(fake), warn=warnings.append)
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(compactor.run)
            await until(lambda: bool(warnings) and not compactor.in_flight)
            assert compactor.setup_error is not None and not compactor.can_start()
            group.cancel_scope.cancel()
    finally:
        chat.close()


# -- 3. a counted wait ------------------------------------------------------------------------


async def test_a_wait_that_ends_leaves_the_timer_to_one_that_goes_on(home: Path) -> None:
    """A turn waits, and a `memory compact` client comes and goes meanwhile: the failed node is
    still retried 10 s after its failure, for the turn."""
    clock = FakeClock()
    fake = AnthropicFake(Script(summarizer(300)).push(Fail(500, should_retry=False)))
    chat = long_chat(home, 1)
    compactor = compactor_for(chat, compactor_provider(fake), clock=clock)
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(waits_on, compactor)  # the turn's
            group.start_soon(compactor.run)
            with compactor.waiting():  # the client's
                await until(lambda: (0, 0) in compactor.failed_at and not compactor.in_flight)
            assert compactor.waited_on
            clock.advance(RETRY_SECONDS)
            compactor.wake()
            await until(lambda: chat.core.tree.is_built((0, 0)))
            group.cancel_scope.cancel()
        assert not compactor.waited_on
    finally:
        chat.close()
