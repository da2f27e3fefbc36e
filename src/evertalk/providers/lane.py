"""Turns first, on a server that serves one request at a time (a local model's; SPEC §4.1).

Such a server runs one request at a time. A default llama-cpp-python server stops the stream it is
sending when another request arrives (and ends it with `[DONE]` and no finish reason); others
queue the second request behind the first. Either way, a compaction and a turn that call it at
once cut or slow each other, and the user waits. So turns take the lane:

- while a turn's call streams (`TurnLane.turn`, which `TurnsFirst` holds around every call of a
  turn or a subagent), no compaction call starts: `TurnLane.compaction` waits until none does;
- a compaction call in flight when a turn's call starts is cancelled at once, and leaves with
  `Yielded`; the compactor sends it again once the turns' calls are over. It is not the node's
  failure (SPEC §4.5): nothing was wrong with it.

A turn's call goes out once the compaction calls it cancelled are gone (or after YIELD_SECONDS,
should one be slow to go), so that the server never sees the two at once.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio

from evertalk.providers.base import Event, Provider, Request

YIELD_SECONDS = 2.0
"""The longest a turn's call waits for the compaction calls it cancelled to be gone: closing a
stream takes milliseconds, and the turn must not hang on one that does not close."""


class Yielded(Exception):
    """A compaction call cancelled so that a turn's call could go first."""


class TurnLane:
    """Shared by the turns' provider (`TurnsFirst`) and the compactor of one session."""

    def __init__(self) -> None:
        self._turns = 0  # turn calls streaming now (a turn's and its subagents')
        self._clear: anyio.Event | None = None  # set when the last of them ends
        self._compactions: dict[anyio.CancelScope, anyio.Event] = {}  # → set once it is gone
        self.yielded = 0  # compaction calls cancelled for a turn, over the session

    @property
    def busy(self) -> bool:
        """Whether a turn's call streams now."""
        return self._turns > 0

    async def wait_clear(self) -> None:
        """Until no turn's call streams."""
        while self._turns:
            assert self._clear is not None
            await self._clear.wait()

    @asynccontextmanager
    async def turn(self) -> AsyncIterator[None]:
        """Hold the lane for one call of a turn: the compaction calls in flight are cancelled,
        and none starts until the last turn call holding it ends."""
        self._turns += 1
        if self._turns == 1:
            self._clear = anyio.Event()
        try:
            gone = list(self._compactions.values())
            for scope in self._compactions:
                scope.cancel()
            with anyio.move_on_after(YIELD_SECONDS):
                for event in gone:
                    await event.wait()
            yield
        finally:
            self._turns -= 1
            if self._turns == 0 and self._clear is not None:
                self._clear.set()

    @asynccontextmanager
    async def compaction(self) -> AsyncIterator[None]:
        """Run one compaction call once no turn's call streams; raises Yielded when a turn's
        call starts before it is over (its work is then lost: the caller sends it again)."""
        await self.wait_clear()
        gone = anyio.Event()
        with anyio.CancelScope() as scope:
            self._compactions[scope] = gone
            try:
                yield
            finally:
                del self._compactions[scope]
                gone.set()
        if scope.cancelled_caught:
            self.yielded += 1
            raise Yielded


class TurnsFirst:
    """A provider whose every call holds the lane while it streams: the turns' and subagents'
    provider of a session whose compactor yields to them."""

    def __init__(self, inner: Provider, lane: TurnLane) -> None:
        self.inner = inner
        self.lane = lane
        self.name = inner.name

    async def stream(self, request: Request) -> AsyncIterator[Event]:
        async with self.lane.turn():
            async for event in self.inner.stream(request):
                yield event

    async def aclose(self) -> None:
        await self.inner.aclose()


def turns_first(provider: Provider, lane: TurnLane | None) -> Provider:
    """`provider` holding `lane` around each call; itself when there is no lane."""
    return provider if lane is None else TurnsFirst(provider, lane)
