"""`PgStorage`: the store interface (`store.storage.ChatStorage`) over a chat in PostgreSQL.

The chat's state is the database's; this machine keeps a folder of its own beside it (the
home's `chat/`, 0700) for what belongs to the machine: the service's socket, the held messages,
the images, the compactor's status. Its lock says, as for a chat kept in files, that one
service owns the chat on this machine; other machines have their own.

Every call goes through a `PgSession`, which connects again after a lost connection: an
append with an idempotency key is sent again; one without a key that was cut off is not, and
the chat then wants a reopen (`must_reopen`), since only the log says whether it got in. While
the database is down each call raises `DatabaseDown`, one line, and nothing is kept aside.

Every call runs in the chat's database thread (`worker.DbThread`): a coroutine awaits it
(`call`) or leaves it to run in its turn (`submit`), and the event loop goes on meanwhile; a
program without one waits for it (the methods of the store interface).
"""

from __future__ import annotations

import contextlib
from array import array
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import TypeVar

from evertalk.memory.core import SavedViews
from evertalk.pgstore.chats import Change
from evertalk.pgstore.errors import PgStoreError
from evertalk.pgstore.leases import Lease
from evertalk.pgstore.opening import Opening, opening
from evertalk.pgstore.pgchat import PgChat
from evertalk.pgstore.session import OutcomeUnknown, PgSession
from evertalk.pgstore.worker import DbThread, on_event_loop
from evertalk.store.lock import ChatLock
from evertalk.store.message_log import NewMessage
from evertalk.store.records import MessageRecord, NodeRecord
from evertalk.store.secure import make_dir
from evertalk.store.storage import NodeRow

T = TypeVar("T")

LEASE_SECONDS = 30.0
"""How long a compaction's lease lasts unless renewed: its machine renews it while the call
runs, so that only a machine that died (or lost the database) lets one lapse."""


class PgStorage:
    """The chat of `session`, owned on this machine by the process that holds `folder`'s lock."""

    def __init__(
        self,
        session: PgSession,
        folder: Path,
        lock: ChatLock | None,
        lease_seconds: float = LEASE_SECONDS,
    ) -> None:
        self.session = session
        self.lease_seconds = lease_seconds
        self.path = folder
        self.warnings: list[str] = []
        self.stale: str | None = None
        self._lock = lock
        self._closed = False
        self._lost: str | None = None  # an append cut off: whether it got in is unknown
        self._opened: Opening | None = None  # what the open reads, until `opened`
        self.chat_id = 0
        """The chat's id in the database (its row in evertalk.chats)."""
        self.worker = DbThread(f"chat {session.name!r} of {session.where}")
        """The thread every call on the session's connection runs in."""

    @classmethod
    def open(
        cls,
        session: PgSession,
        folder: Path,
        *,
        readonly: bool = False,
        lease_seconds: float = LEASE_SECONDS,
    ) -> PgStorage:
        """Connect (DatabaseDown when the database cannot be reached) and read the chat as of
        one moment, as it stood when its views were saved (`opening.py`); the folder is made
        and locked unless `readonly`."""
        lock = None
        if not readonly:
            make_dir(folder)
            lock = ChatLock.acquire(folder)
        storage = cls(session, folder, lock, lease_seconds)
        try:
            storage._opened = opening(storage._run(PgChat.snapshot))
            storage.chat_id = storage._run(lambda chat: chat.chat)
        except BaseException:
            storage.close()
            raise
        return storage

    @property
    def where(self) -> str:
        return self.session.where

    @property
    def opened_at(self) -> int:
        """The sequence number the open read the chat at: the changes after it are folded."""
        assert self._opened is not None
        return self._opened.seq

    @property
    def since_opened(self) -> tuple[Change, ...]:
        """The changes after `opened_at` the open read too, for the chat to fold first."""
        assert self._opened is not None
        return self._opened.changes

    def opened(self) -> None:
        """The chat was built from the open's reads: T is read from the database from now."""
        self._opened = None

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def message_count(self) -> int:
        if self._opened is not None:
            return self._opened.t
        return self._run(lambda chat: chat.message_count)

    @property
    def must_reopen(self) -> str | None:
        return self._lost

    # Writing

    def append_pages(
        self, message: NewMessage, pages: Sequence[str], *, durable: bool = True
    ) -> list[int]:
        """Log the pages in one transaction, committed before this returns (`durable` is
        always so: every commit is synchronous)."""
        del durable
        return self.log_pages(message, pages)[0]

    def log_pages(
        self,
        message: NewMessage,
        pages: Sequence[str],
        leaves: Sequence[str | None] = (),
        epoch: int | None = None,
    ) -> tuple[list[int], int | None]:
        """As `append_pages`, with the change's sequence number (None: nothing changed), and
        the pages' free leaves stored with them; `epoch`, the turn's that logs it (StaleTurn
        once another session has taken the turn)."""
        try:
            return self._run(
                lambda chat: chat.log_pages(message, pages, leaves, epoch=epoch),
                idempotent=message.key is not None,
            )
        except OutcomeUnknown as error:
            self._lost = str(error)
            raise

    async def alog_pages(
        self,
        message: NewMessage,
        pages: Sequence[str],
        leaves: Sequence[str | None] = (),
        epoch: int | None = None,
    ) -> tuple[list[int], int | None]:
        """`log_pages`, awaited."""
        try:
            return await self.call(
                lambda chat: chat.log_pages(message, pages, leaves, epoch=epoch),
                idempotent=message.key is not None,
            )
        except OutcomeUnknown as error:
            self._lost = str(error)
            raise

    def append_nodes(self, nodes: Sequence[NodeRow]) -> None:
        """Store the nodes the memory core derived (free nodes), as every machine derives them."""
        self._run(lambda chat: chat.put_derived(nodes))

    def put_node(self, node: NodeRow) -> int | None:
        """Store a node built by a model (or cut): one change of the chat, its sequence number;
        None when another machine built it first (the refusal is counted)."""
        l, i, text, flag = node  # noqa: E741
        return self._run(lambda chat: chat.put_built(l, i, text, flag))

    def count_failure(self, l: int, i: int) -> int:  # noqa: E741
        """Count a failed compaction of (l, i) for the chat; how many it has. Not sent again
        after a lost reply: a failure counted twice would cut the node early."""
        return self._run(lambda chat: chat.count_failure(l, i), idempotent=False)

    # Reading

    def read_message(self, i: int) -> MessageRecord:
        return self._run(lambda chat: chat.read_message(i))

    def read_messages(self, start: int, stop: int) -> list[MessageRecord]:
        return self._run(lambda chat: chat.read_messages(start, stop))

    def read_node(self, l: int, i: int) -> NodeRecord | None:  # noqa: E741
        return self._run(lambda chat: chat.read_node(l, i))

    def logged(self, key: str) -> bool:
        return self._run(lambda chat: chat.logged(key))

    def logged_ids(self, key: str) -> list[int] | None:
        return self._run(lambda chat: chat.logged_ids(key))

    def node_sizes(self) -> list[array[int]]:
        assert self._opened is not None, "sizes are read at the open only"
        return self._opened.shape.sizes

    def node_flags(self) -> list[bytearray]:
        assert self._opened is not None, "flags are read at the open only"
        return self._opened.shape.flags

    def changes_since(self, seq: int) -> list[Change]:
        return self._run(lambda chat: chat.changes_since(seq))

    # Leases

    def claim(self, l: int, i: int) -> bool:  # noqa: E741
        return self._run(lambda chat: chat.claim(l, i, self.lease_seconds))

    def release(self, l: int, i: int) -> None:  # noqa: E741
        self._run(lambda chat: chat.release(l, i))

    def live_leases(self) -> list[Lease]:
        return self._run(PgChat.live_leases)

    def add_usage(self, row: str) -> None:
        """Keep a model call's ledger record in the database too (every machine's there)."""
        self._run(lambda chat: chat.add_usage(row), idempotent=False)

    # Views

    def load_views(self) -> SavedViews | str | None:
        if self._opened is not None:
            return self._opened.views
        return self._run(PgChat.load_views)

    def save_views(self, saved: SavedViews, seq: int | None = None) -> None:
        """Save the views as folded up to change `seq` (None: the chat's latest)."""
        self._run(lambda chat: chat.save_views(saved, seq))

    def set_budget(self, sizes: tuple[int, int, int, int]) -> int:
        """Make `sizes` the chat's view budget: a change, whose sequence number it returns."""
        return self._run(lambda chat: chat.set_budget(sizes))  # twice is as once

    def save_views_unowned(self, saved: SavedViews, loaded: SavedViews | str | None) -> bool:
        """A reader leaves the views to the services: they save them as they go."""
        del saved, loaded
        return False

    # The rest of the interface

    def sync(self) -> None:
        """Nothing to do: every change was committed, synchronously, as it was made."""

    def resync(self) -> None:
        self.stale = None

    def close(self) -> None:
        """Close the connection after the calls made before, then the thread. On an event
        loop this does not wait for them: a database that went silent would stop it."""
        if self._closed:
            return
        self._closed = True
        try:
            closed = self.worker.submit(self.session.close)
            self.worker.close()
            if not on_event_loop():
                with contextlib.suppress(Exception):
                    closed.result()
        finally:
            if self._lock is not None:
                self._lock.release()

    def _run(self, operation: Callable[[PgChat], T], *, idempotent: bool = True) -> T:
        self._open_or_raise()
        what = getattr(operation, "__qualname__", "a database call")
        return self.worker.run(lambda: self.session.run(operation, idempotent=idempotent), what)

    def read(self, operation: Callable[[PgChat], T]) -> T:
        """`operation(chat)` in the database thread, waited for (made again after a lost
        connection: it only reads)."""
        return self._run(operation)

    async def call(self, operation: Callable[[PgChat], T], *, idempotent: bool = True) -> T:
        """`operation(chat)` in the database thread, awaited (see `PgSession.run`)."""
        self._open_or_raise()
        return await self.worker.call(lambda: self.session.run(operation, idempotent=idempotent))

    def submit(self, operation: Callable[[PgChat], T], *, idempotent: bool = True) -> Future[T]:
        """`operation(chat)` in the database thread, in its turn, not waited for."""
        self._open_or_raise()
        return self.worker.submit(lambda: self.session.run(operation, idempotent=idempotent))

    def _open_or_raise(self) -> None:
        if self._closed:
            raise PgStoreError(f"the chat in the database at {self.where} is closed")
