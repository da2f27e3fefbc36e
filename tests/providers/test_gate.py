"""The prefix gate (SPEC §4.6): same marked prefix → wait for the writer's response to start."""

from __future__ import annotations

import anyio
import pytest

from evertalk.providers.gate import PrefixGate

pytestmark = pytest.mark.anyio


async def test_second_call_on_same_prefix_waits_until_first_response_starts() -> None:
    gate = PrefixGate()
    log: list[str] = []
    first_started = await gate.enter(["model|A"])

    async def second() -> None:
        started = await gate.enter(["model|A"])
        log.append("second sent")
        started()

    async with anyio.create_task_group() as group:
        group.start_soon(second)
        await anyio.sleep(0.05)
        assert log == []  # still waiting: the first response has not begun
        log.append("first started")
        first_started()
    assert log == ["first started", "second sent"]
    assert gate.pending() == 0


async def test_different_prefixes_do_not_wait() -> None:
    gate = PrefixGate()
    await gate.enter(["model|A"])
    with anyio.fail_after(1):
        started = await gate.enter(["model|B", "other-model|A"])
    started()
    assert gate.pending() == 1


async def test_a_call_that_ends_without_starting_releases_waiters() -> None:
    gate = PrefixGate()
    ended = await gate.enter(["k"])
    order: list[int] = []

    async def waiter(n: int) -> None:
        started = await gate.enter(["k"])
        order.append(n)
        started()

    async with anyio.create_task_group() as group:
        for n in range(3):
            group.start_soon(waiter, n)
        await anyio.sleep(0.02)
        assert order == []
        ended()  # e.g. the call failed before its response began
    assert sorted(order) == [0, 1, 2]


async def test_cancelled_waiter_claims_nothing() -> None:
    gate = PrefixGate()
    release = await gate.enter(["k"])
    with anyio.move_on_after(0.05):
        await gate.enter(["k"])
    release()
    assert gate.pending() == 0
