"""A session's part in a chat shared by several machines (SPEC §13): `Sharing`.

It follows the other machines' changes as they are committed (a listener on a connection of
its own, woken by NOTIFY, waiting in a worker thread), folds them into this machine's chat and
says what came: the windows show each message, the compactor looks at the new work. The leases
of this machine's compactions are renewed on a timer of their own, so that no wait of the
listener's lets one lapse while its call runs.

And it keeps turns one at a time for the whole chat: a turn starts here only while this machine
holds the chat's turn lock. A message sent meanwhile is held here, durably, as one sent during
a turn of this machine's, and its turn starts once the other machine's has ended. A turn is
fenced: its appends carry the epoch its lock was taken at (`TurnFence`), and a watcher looks
every few seconds whether the lock is still held. When it is not, or the database refuses an
append of a stale epoch, the turn is told (`lost`), and stops; its message is answered again
once this machine holds the turn (`lost_turn.py`).

While the database cannot be reached, it says so once, and tries again with a growing delay;
the chat goes on with what it has.

No database call runs on the event loop: the listener's connection and the turn lock's each
have a thread of their own (`pgstore/worker.py`), as the chat's has, and the turns' messages
are logged by the chat's writer, which runs here beside the listener (`shared_log.py`).
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager, suppress
from functools import partial

import anyio

from evertalk.agent.lost_turn import hold_again
from evertalk.agent.turn import Held
from evertalk.compactor.service import Compactor
from evertalk.pgstore.backoff import Backoff
from evertalk.pgstore.connect import connect
from evertalk.pgstore.listen import Listener
from evertalk.pgstore.turns import TurnLock
from evertalk.pgstore.worker import DbThread
from evertalk.shared_chat import TURN, SharedChat, TurnFence
from evertalk.store.errors import StoreError

WAIT_SECONDS = 1.0
"""The longest a listener's wait in its thread lasts: a closing session waits no longer."""
TURN_POLL_SECONDS = 0.5
"""How often a turn that waits for another machine's looks at the lock between two changes."""
WATCH_SECONDS = 3.0
"""How often a running turn's watcher asks the server whether this machine still holds it."""
ENDING_SECONDS = 10.0
"""How long a turn's end waits for its messages to be logged, and its lock to be released,
before the next turn may begin (what is left is logged in its turn, or refused as stale)."""


def _nothing() -> None:
    """A turn that needs no word of its lost lock."""


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
        self._said: str | None = None
        self._changed = anyio.Event()
        self.turns = TurnLock(lambda: connect(url), chat.shared.chat_id, chat.machine)
        self._turn_thread = DbThread("the turn lock")
        self._listen_thread = DbThread("the listener")
        self.watch_seconds = WATCH_SECONDS
        """How often a running turn's watcher looks at the lock (a test may shorten it)."""

    async def follow(self) -> None:
        """Fold in the other machines' changes as they come, and keep this machine's leases,
        until cancelled."""
        async with anyio.create_task_group() as group:
            group.start_soon(self._renewing)
            group.start_soon(self.chat.writer.run)
            await self._listening()

    async def _listening(self) -> None:
        backoff = Backoff()
        while True:
            opening = partial(Listener, self.url, self.chat.shared.chat_id)
            try:
                await self._follow_on(await self._listen_thread.call(opening))
            except StoreError as error:
                self._say(str(error))
                await anyio.sleep(backoff.next_delay())
            else:
                backoff.reset()

    async def _follow_on(self, listener: Listener) -> None:
        try:
            while True:
                await self._fold()
                self._leases_looked_at()
                seq = self.chat.follower.seq
                await self._listen_thread.call(partial(listener.wait, seq, WAIT_SECONDS))
        finally:
            with suppress(Exception):  # in its thread, once a wait it may be in is over
                self._listen_thread.submit(listener.close)

    async def _fold(self) -> None:
        before = self.chat.follower.seq
        await self.chat.afollow()
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

    async def _renewing(self) -> None:
        """Keep the claims of this machine's compactions while they run: a timer of its own, so
        that a lease never lapses while the listener waits to connect again."""
        while True:
            await anyio.sleep(self.chat.renew_every)
            running = self.compactor.in_flight
            if not running:
                continue
            try:
                await self.chat.arenew(running)
            except StoreError as error:
                self._say(str(error))

    def _say(self, line: str) -> None:
        if line != self._said:
            self._said = line
            self._warn(f"memory: {line}")

    @asynccontextmanager
    async def turn(self, lost: Callable[[], None] = _nothing) -> AsyncIterator[TurnFence]:
        """Hold the chat's turn for the block, once no other machine holds it (said once). The
        block's appends carry the turn's epoch; `lost` is called (once) if the lock is lost
        meanwhile, and the fence yielded says so."""
        told = False
        while (epoch := await self._try_take()) is None:
            if not told:
                told = True
                holder = await self._turn_thread.call(self._holder)
                who = f"on {holder}" if holder else "on another machine"
                self._warn(f"a turn runs {who}: this one starts when it ends")
            with anyio.move_on_after(TURN_POLL_SECONDS):
                await self._changed.wait()
        fence = TurnFence(epoch, lost)
        token = TURN.set(fence)
        try:
            with suppress(StoreError):
                await self.chat.afollow()  # the other machine's turn is in this one's view
            async with _one_error(), anyio.create_task_group() as group:
                group.start_soon(self._watch, fence)
                try:
                    yield fence
                finally:
                    group.cancel_scope.cancel()
        finally:
            TURN.reset(token)
            with anyio.CancelScope(shield=True):
                with anyio.move_on_after(ENDING_SECONDS), suppress(StoreError):
                    await self.chat.flushed()  # logged under the lock its epoch names
                fence.active = False
                released = self._turn_thread.submit(self.turns.release)  # made whatever comes
                with anyio.move_on_after(ENDING_SECONDS):
                    await asyncio.shield(asyncio.wrap_future(released))

    async def _watch(self, fence: TurnFence) -> None:
        """Look every few seconds whether this machine still holds the turn: a session the
        server dropped (a closed lid, a network that went away) has lost it."""
        while not fence.lost:
            await anyio.sleep(self.watch_seconds)
            holding = await self._turn_thread.call(self.turns.holding)
            if not holding:
                fence.lose()

    def again(self, taken: Sequence[Held]) -> list[Held]:
        """What a turn that lost its lock took, as it is to be held again (`lost_turn.py`):
        reads the log, so it runs in a worker thread."""
        return hold_again(taken, self.chat.ids_logged)

    async def _try_take(self) -> int | None:
        """The epoch of the turn once taken; None while another machine holds it. While the
        database cannot be reached, says so once and tries again after a growing delay: the
        message stays held meanwhile."""
        while True:
            try:
                epoch = await self._turn_thread.call(self.turns.try_take)
            except StoreError as error:
                self._say(str(error))
                await anyio.sleep(self._turn_backoff.next_delay())
                continue
            self._turn_backoff.reset()
            return epoch

    def _holder(self) -> str | None:
        try:
            return self.turns.holder()
        except StoreError:
            return None

    def close(self) -> None:
        """Close the lock's and the listener's connections in their threads, in their turn
        (a database gone silent holds them: they are not waited for)."""
        with suppress(RuntimeError):
            self._turn_thread.submit(self.turns.close)
        self._turn_thread.close()
        self._listen_thread.close()


@asynccontextmanager
async def _one_error() -> AsyncIterator[None]:
    """The error of a block run beside its watcher, as itself rather than in a group."""
    try:
        yield
    except BaseExceptionGroup as group:
        if len(group.exceptions) == 1:
            raise group.exceptions[0] from None
        raise
