"""The prefix gate (SPEC §4.6): one call at a time writes a given cache entry.

A provider makes a new cache entry readable only once the response of the call writing it
has begun. Up to eight compactions start together on the same prefix; without the gate each
would pay to write it. A call that carries a marked prefix which an earlier, still unstarted
call is writing waits until that response starts or that call ends. A call only ever waits
for one that was sent before it, so waits never form a cycle.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Sequence

import anyio

from evertalk.providers.base import Event, Provider, Request, Started


class PrefixGate:
    def __init__(self) -> None:
        self._writers: dict[str, anyio.Event] = {}

    def pending(self) -> int:
        """How many marked prefixes are being written right now (for tests and status)."""
        return len(self._writers)

    async def enter(self, keys: Sequence[str]) -> Callable[[], None]:
        """Wait for earlier writers of these prefixes; return the call's "response started"."""
        while True:
            busy = [self._writers[key] for key in keys if key in self._writers]
            if not busy:
                break
            await busy[0].wait()
        # no await between the check above and these claims: they are atomic in the loop
        claimed = {key: anyio.Event() for key in dict.fromkeys(keys)}
        self._writers.update(claimed)

        def started() -> None:
            for key, event in claimed.items():
                if self._writers.get(key) is event:
                    del self._writers[key]
                event.set()

        return started


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
        started = await self.gate.enter(self.keys(request))
        try:
            async for event in self.inner.stream(request):
                if isinstance(event, Started):
                    started()
                yield event
        finally:
            started()

    async def aclose(self) -> None:
        await self.inner.aclose()
