"""A connection's thread (`pgstore/worker.py`): calls run one at a time in the order made, a
coroutine that awaits one leaves its event loop free, and a call waited for on an event loop is
noted."""

from __future__ import annotations

import threading

import anyio
import pytest

from evertalk.pgstore import worker
from evertalk.pgstore.worker import DbThread


def test_calls_run_in_one_thread_in_the_order_made() -> None:
    thread = DbThread("test")
    seen: list[tuple[int, str]] = []
    futures = [
        thread.submit(lambda n=n: seen.append((n, threading.current_thread().name)))
        for n in range(50)
    ]
    assert thread.run(lambda: 7) == 7
    assert all(future.done() for future in futures)
    assert [n for n, _ in seen] == list(range(50))
    assert {name for _, name in seen} == {"evertalk-db-test"}
    thread.close()
    with pytest.raises(RuntimeError):
        thread.submit(lambda: None)


@pytest.mark.anyio
async def test_a_call_awaited_leaves_the_loop_free_and_one_waited_for_is_noted() -> None:
    thread = DbThread("test")
    release = threading.Event()
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await anyio.sleep(0.01)

    worker.LOOP_CALLS.clear()
    async with anyio.create_task_group() as group:
        group.start_soon(tick)
        threading.Timer(0.5, release.set).start()
        assert await thread.call(lambda: release.wait(5)) is True  # a database gone silent
        group.cancel_scope.cancel()
    assert ticks > 20
    assert worker.LOOP_CALLS == []
    assert thread.run(lambda: 1, "a read") == 1  # waited for on the loop: noted
    assert worker.LOOP_CALLS == ["a read"]
    worker.LOOP_CALLS.clear()
    thread.close()
