"""A shared chat's log as its turns write it: `QueuedLog` takes each message at once and the
chat's `Writer` logs them one at a time, in order, in the database's thread, while the turn goes
on (streaming, thinking) on the event loop.

The turn waits for its log where it matters (`flushed`): before a tool acts, so that a call is
in the log before anything it does, and at the turn's end. Every message a turn logs carries an
idempotency key, so one that the database could not take (it is down) is sent again, in its
place, once it can: nothing after it is logged first. One refused as stale (another machine has
taken the turn since) tells its turn, and the rest of that turn's are dropped, as the database
would refuse them too.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol

import anyio

from evertalk.pgstore.errors import StaleTurn
from evertalk.pgstore.session import DatabaseDown
from evertalk.store.errors import StoreError
from evertalk.store.message_log import MessageLog, NewMessage

RETRY_SECONDS = 0.5
"""The least wait before a message the database could not take is sent again."""


class Fence(Protocol):
    """The turn a message was logged for (`shared_chat.TurnFence`): lost, once another machine
    has taken the turn."""

    lost: bool


@dataclass(frozen=True)
class Queued:
    """A message to log, with the turn that logs it and the epoch its lock had then."""

    message: NewMessage
    fence: Fence | None
    epoch: int | None


class Writer:
    """The queued messages of a chat, logged in order by `write`: by `run` while the service
    runs it, else by whoever waits for them (`flushed`)."""

    def __init__(self, write: Callable[[Queued], Awaitable[object]]) -> None:
        self._write = write
        self._queue: deque[Queued] = deque()
        self._error: StoreError | None = None
        self._running = False
        self._woken: anyio.Event | None = None
        self._emptied: anyio.Event | None = None
        self._lock: anyio.Lock | None = None

    def __len__(self) -> int:
        return len(self._queue)

    def put(self, item: Queued) -> None:
        self._queue.append(item)
        if self._woken is not None:
            self._woken.set()

    async def run(self) -> None:
        """Log what is queued as it comes, until cancelled."""
        self._running = True
        try:
            while True:
                while self._queue:
                    await self._write_first()
                self._tell_emptied()
                self._woken = anyio.Event()
                if not self._queue:
                    await self._woken.wait()
        finally:
            self._running = False
            self._tell_emptied()

    async def flushed(self) -> None:
        """Once every message queued is logged, or dropped: then the error of one dropped (not
        a stale one: its turn was told), once."""
        while self._queue:
            if self._running:
                if self._emptied is None:
                    self._emptied = anyio.Event()
                await self._emptied.wait()
            else:
                await self._write_first()
        error, self._error = self._error, None
        if error is not None:
            raise error

    def _tell_emptied(self) -> None:
        if self._emptied is not None:
            self._emptied.set()
            self._emptied = None

    async def _write_first(self) -> None:
        if self._lock is None:
            self._lock = anyio.Lock()
        async with self._lock:
            if not self._queue:
                return
            item = self._queue[0]
            if item.fence is not None and item.fence.lost:
                self._queue.popleft()  # its turn is over: the database would refuse it
                return
            try:
                await self._write(item)
            except DatabaseDown as down:  # its key makes sending it again safe
                await anyio.sleep(max(down.retry_in, RETRY_SECONDS))
                return
            except StaleTurn:
                self._drop(item.fence)
                return
            except StoreError as error:
                self._queue.popleft()
                self._error = error
                return
            self._queue.popleft()

    def _drop(self, fence: Fence | None) -> None:
        self._queue = deque(item for item in self._queue if item.fence is not fence)


class QueuedLog(MessageLog):
    """The log a turn writes to: `put` takes the message (see the module's docstring), and the
    ids are not waited for (a turn does not use them: []). `flushed` waits for them."""

    def __init__(self, put: Callable[[NewMessage], None], flushed: Callable[[], Awaitable[None]]):
        self._put = put
        self._flushed = flushed

    def log_message(self, message: NewMessage) -> list[int]:
        self._put(message)
        return []

    async def flushed(self) -> None:
        await self._flushed()
