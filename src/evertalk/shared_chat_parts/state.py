"""`SharedState`: what a chat kept in PostgreSQL holds beside `Chat`'s; its parts build on it."""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable

from evertalk.chat import Chat
from evertalk.memory import MemoryCore, Node
from evertalk.pgstore.follow import Follower
from evertalk.pgstore.storage import PgStorage
from evertalk.pgstore.worker import on_event_loop
from evertalk.shared_chat_parts.others_leases import OthersLeases
from evertalk.shared_kept import Kept
from evertalk.shared_log import Queued, Writer
from evertalk.store.records import NodeRecord
from evertalk.store.storage import ChatStorage


class SharedState(Chat):
    """The database, the feed's follower, and what this machine keeps while it folds."""

    def __init__(self, store: ChatStorage, core: MemoryCore, readonly: bool) -> None:
        assert isinstance(store, PgStorage)
        super().__init__(store, core, readonly)
        self.shared = store
        self.follower = Follower(store.session.machine, store.opened_at)
        self._since_opened = store.since_opened  # folded by `open_shared`
        store.opened()
        self._save_due = False  # the views are saved once the change that made it is folded
        self.others: list[tuple[str, int]] = []
        """(machine, id) of the messages other machines logged, not yet taken (`follow`)."""
        self._own: dict[int, tuple[str, list[str]]] = {}  # pages this machine just logged
        self._texts_built: dict[Node, tuple[str, int]] = {}  # lines (and flags) just stored
        self._nodes_read: dict[Node, NodeRecord] = {}  # read for the changes being folded
        self._leases = OthersLeases(store, self.follower.machine)
        self.kept = Kept()
        self.writer = Writer(self._write_queued)
        """Logs what the turns queue (`turn_log`): the service runs it (`agent/sharing.py`)."""
        self._unreachable: str | None = None  # why the database was not reached, last time

    @abstractmethod
    async def _write_queued(self, item: Queued) -> None:
        """Log a message a turn queued (`SharedMessages`)."""

    @property
    def kept_where(self) -> str:
        return f"the chat in the database at {self.shared.where}"

    @property
    def machine(self) -> str:
        return self.follower.machine

    def usage_copy(self) -> Callable[[str], None] | None:
        return self._copy_usage

    def _copy_usage(self, row: str) -> None:
        """A model call's ledger record in the database too; on an event loop, not waited for
        (the home's ledger has it)."""
        if on_event_loop():
            self.shared.submit(lambda chat: chat.add_usage(row), idempotent=False)
        else:
            self.shared.add_usage(row)
