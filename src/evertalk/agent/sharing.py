"""A session's part in a chat shared by several machines (SPEC §13): `Sharing`.

It follows the other machines' changes as they are committed (a listener on a connection of
its own, woken by NOTIFY, waiting in a worker thread), folds them into this machine's chat and
says what came: the windows show each message, the compactor looks at the new work. And it
keeps turns one at a time for the whole chat: a turn starts here only while this machine holds
the chat's turn lock. A message sent meanwhile is held here, durably, as one sent during a turn
of this machine's, and its turn starts once the other machine's has ended.

While the database cannot be reached, it says so once, and tries again with a growing delay;
the chat goes on with what it has.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager, suppress

import anyio

from evertalk.compactor.service import Compactor
from evertalk.pgstore.backoff import Backoff
from evertalk.pgstore.connect import connect
from evertalk.pgstore.listen import Listener
from evertalk.pgstore.turns import TurnLock
from evertalk.shared_chat import SharedChat
from evertalk.store.errors import StoreError

WAIT_SECONDS = 1.0
"""The longest a listener's wait in its thread lasts: a closing session waits no longer."""
TURN_POLL_SECONDS = 0.5
"""How often a turn that waits for another machine's looks at the lock between two changes."""


class Sharing:
    """Following chat `chat` of the database at `url` for this machine's `compactor`, and the
    chat's turn lock. `on_logged` is told of the other machines' messages, `warn` of what the
    user should know (one line each)."""

    def __init__(
        self,
        chat: SharedChat,
        url: str,
        compactor: Compactor,
        on_logged: Callable[[list[tuple[str, int]]], None],
        warn: Callable[[str], None],
    ) -> None:
        self.chat = chat
        self.url = url
        self.compactor = compactor
        self._on_logged = on_logged
        self._warn = warn
        self._leased = False  # whether other machines held leases when last looked at
        self._turn_backoff = Backoff()
        self._renewed = time.monotonic()
        self._said: str | None = None
        self._changed = anyio.Event()
        self.turns = TurnLock(lambda: connect(url), chat.shared.chat_id, chat.machine)

    async def follow(self) -> None:
        """Fold in the other machines' changes as they come, until cancelled."""
        backoff = Backoff()
        while True:
            try:
                await self._follow_on(Listener(self.url, self.chat.shared.chat_id))
            except StoreError as error:
                self._say(str(error))
                await anyio.sleep(backoff.next_delay())
            else:
                backoff.reset()

    async def _follow_on(self, listener: Listener) -> None:
        try:
            while True:
                self._fold()
                self._renew()
                self._leases_looked_at()
                seq = self.chat.follower.seq
                await anyio.to_thread.run_sync(listener.wait, seq, WAIT_SECONDS)
        finally:
            with suppress(Exception):
                listener.close()

    def _fold(self) -> None:
        before = self.chat.follower.seq
        self.chat.follow()
        logged, self.chat.others = self.chat.others, []
        if self._said is not None:
            self._said = None
            self._warn(f"memory: the database at {self.chat.shared.where} is reachable again")
        if logged:
            self._on_logged(logged)
            self.compactor.message_logged()  # new work, and failed nodes may be tried again
        if self.chat.follower.seq != before:
            self.compactor.wake()  # a node built elsewhere may let a merge start here
            changed, self._changed = self._changed, anyio.Event()
            changed.set()

    def _leases_looked_at(self) -> None:
        """Wake the compactor while other machines hold leases, and once more when they are
        gone: a lease that lapsed (its machine died) lets a node start here."""
        leased = bool(self.chat.leased_elsewhere())
        if leased or self._leased:
            self.compactor.wake()
        self._leased = leased

    def _renew(self) -> None:
        """Keep the claims of this machine's compactions while they run."""
        now = time.monotonic()
        if now - self._renewed >= self.chat.renew_every:
            self._renewed = now
            self.chat.renew(self.compactor.in_flight)

    def _say(self, line: str) -> None:
        if line != self._said:
            self._said = line
            self._warn(f"memory: {line}")

    @asynccontextmanager
    async def turn(self) -> AsyncIterator[None]:
        """Hold the chat's turn for the block, once no other machine holds it (said once)."""
        told = False
        while not (taken := await self._try_take()):
            if taken is None:
                continue  # the database is down: said, and waited for
            if not told:
                told = True
                holder = await anyio.to_thread.run_sync(self._holder)
                who = f"on {holder}" if holder else "on another machine"
                self._warn(f"a turn runs {who}: this one starts when it ends")
            with anyio.move_on_after(TURN_POLL_SECONDS):
                await self._changed.wait()
        try:
            with suppress(StoreError):
                self.chat.follow()  # what the other machine's turn logged is in this one's view
            yield
        finally:
            with anyio.CancelScope(shield=True):
                await anyio.to_thread.run_sync(self.turns.release)

    async def _try_take(self) -> bool | None:
        """Whether the turn was taken; None while the database cannot be reached (said once,
        and waited for with a growing delay): the message stays held meanwhile."""
        try:
            taken = await anyio.to_thread.run_sync(self.turns.try_take)
        except StoreError as error:
            self._say(str(error))
            await anyio.sleep(self._turn_backoff.next_delay())
            return None
        self._turn_backoff.reset()
        return taken

    def _holder(self) -> str | None:
        try:
            return self.turns.holder()
        except StoreError:
            return None

    def close(self) -> None:
        self.turns.close()
