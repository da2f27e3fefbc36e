"""The prefix gate (SPEC §4.6): a new cache entry is written by one call, not by eight.

A provider makes a new cache entry readable only once the response of the call writing it has
begun. Each cache-marked prefix of a call is a key (the model and the exact bytes up to the
mark). A key is *written* once a call carrying it has received the start of a response, and
stays written for the cache's lifetime after its last use. A new call waits only on a key that is
not written while an earlier call in flight carries it and has no response yet: until that
response starts or that call ends. Every other unwritten key it carries, it writes itself.

A written key never makes a call wait: 8 compactions that share the system prompt and the
older context all go at once, and only the first call on a truly new prefix goes alone. (A gate
on every key, written or not, made calls start one per response latency.) A call waits only for
one that was sent before it, so waits never form a cycle; a waiting call that is cancelled
leaves without claiming anything.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable, Sequence

import anyio

from evertalk.providers.base import Event, Provider, Request, Started

CACHE_LIFETIME = 300.0
"""Seconds a cache entry lives after its last use (the default 5-minute lifetime, SPEC §7)."""

Clock = Callable[[], float]


class Flight:
    """One call through the gate, from its entry to its end. Tell it when the response starts
    (`started`) and when the call is over (`ended`, also after a start: it is idempotent)."""

    def __init__(self, gate: PrefixGate, keys: list[str], claimed: dict[str, anyio.Event]) -> None:
        self._gate = gate
        self._keys = keys
        self._claimed = claimed  # the keys this call writes, with the event their waiters wait on

    def started(self) -> None:
        """The response began: every key of the call is written (or just used) now."""
        self._gate._used(self._keys)
        self._release()

    def ended(self) -> None:
        """The call is over. Without a start, the keys it was writing are not written: each
        goes to one of its waiters, which writes it in turn."""
        self._release()

    def _release(self) -> None:
        claimed, self._claimed = self._claimed, {}
        self._gate._release(claimed)


class PrefixGate:
    def __init__(self, clock: Clock = time.monotonic, lifetime: float = CACHE_LIFETIME) -> None:
        self._clock = clock
        self._lifetime = lifetime
        self._writers: dict[str, anyio.Event] = {}  # unwritten keys being written right now
        # written key → its last use; kept in order of last use, so the expired ones are first
        self._written: dict[str, float] = {}

    # -- state ------------------------------------------------------------------------------

    def pending(self) -> int:
        """How many keys are being written right now (for tests and status)."""
        return len(self._writers)

    def is_written(self, key: str) -> bool:
        used = self._written.get(key)
        return used is not None and self._clock() - used < self._lifetime

    def remembered(self) -> int:
        """How many written keys the gate holds (expired ones are dropped as calls come)."""
        return len(self._written)

    # -- a call -----------------------------------------------------------------------------

    async def enter(self, keys: Sequence[str]) -> Flight:
        """Wait for the earlier writers of this call's unwritten keys; then claim the unwritten
        keys nobody writes. The call must be sent right after (a waiter counts on it)."""
        unique = list(dict.fromkeys(keys))
        while True:
            self._forget_expired()
            unwritten = [key for key in unique if not self.is_written(key)]
            busy = [self._writers[key] for key in unwritten if key in self._writers]
            if not busy:
                break
            # one at a time: when it is set, the others may have been set (or handed on) too
            await busy[0].wait()
        # no await between the check above and these claims: they are atomic in the event loop
        claimed = {key: anyio.Event() for key in unwritten}
        self._writers.update(claimed)
        return Flight(self, unique, claimed)

    # -- what flights report ----------------------------------------------------------------

    def _used(self, keys: list[str]) -> None:
        now = self._clock()
        written = self._written
        for key in keys:
            written.pop(key, None)  # re-inserted at the end: the order stays by last use
            written[key] = now

    def _release(self, claimed: dict[str, anyio.Event]) -> None:
        for key, event in claimed.items():
            if self._writers.get(key) is event:
                del self._writers[key]
            event.set()

    def _forget_expired(self) -> None:
        written, oldest = self._written, self._clock() - self._lifetime
        while written:
            key = next(iter(written))
            if written[key] > oldest:
                return
            del written[key]


class GatedProvider:
    """A provider whose calls pass through a prefix gate (shared by turns and compactions)."""

    def __init__(
        self, inner: Provider, gate: PrefixGate, keys: Callable[[Request], list[str]]
    ) -> None:
        self.inner = inner
        self.gate = gate
        self.keys = keys
        self.name = inner.name

    async def stream(self, request: Request) -> AsyncIterator[Event]:
        flight = await self.gate.enter(self.keys(request))
        try:
            async for event in self.inner.stream(request):
                if isinstance(event, Started):
                    flight.started()
                yield event
        finally:
            flight.ended()

    async def aclose(self) -> None:
        await self.inner.aclose()
