"""A provider made at its first call, in a worker thread.

Importing a model SDK takes seconds (most of it building the SDK's types). Made when evertalk
starts, it would hold back the terminal app's first screen; made on the event loop at the first
call, it would freeze the screen instead. So the provider is made by a worker thread when the
first call needs it, and every call waits for that one making.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable

import anyio

from .base import Event, Provider, Request


class LazyProvider:
    def __init__(self, name: str, make: Callable[[], Provider]) -> None:
        self.name = name  # the kind, known before the SDK is loaded (the gate and ledger use it)
        self._make = make
        self._inner: Provider | None = None
        self._lock: anyio.Lock | None = None

    @property
    def made(self) -> bool:
        return self._inner is not None

    async def _provider(self) -> Provider:
        if self._lock is None:  # made here: a lock belongs to the event loop that runs it
            self._lock = anyio.Lock()
        async with self._lock:
            if self._inner is None:
                self._inner = await anyio.to_thread.run_sync(self._make)
        return self._inner

    async def stream(self, request: Request) -> AsyncIterator[Event]:
        provider = await self._provider()
        async for event in provider.stream(request):
            yield event

    async def aclose(self) -> None:
        if self._inner is not None:
            await self._inner.aclose()
