"""Waiting for a condition the test cannot be told of: polled, with a deadline that fails the
test with what it waited for. Where an event can be awaited, await it instead."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

import anyio


def wait_until(condition: Callable[[], object], what: str, timeout: float = 30) -> None:
    """Block until `condition()` holds (a process's doing, seen from outside)."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, f"{what} did not happen within {timeout} s"
        time.sleep(0.02)


async def until(
    condition: Callable[[], object],
    timeout: float = 30,
    *,
    pause: Callable[[float], Awaitable[object]] = anyio.sleep,
) -> None:
    """Let the event loop run until `condition()` holds; `pause` lets it run (an app's pilot
    pauses its own way)."""
    with anyio.fail_after(timeout):
        while not condition():
            await pause(0.01)
