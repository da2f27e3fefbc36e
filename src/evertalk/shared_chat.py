"""`SharedChat`: the chat kept in PostgreSQL, shared by every machine's service (SPEC §13).

Every change to the shared state (a message logged, a node built or cut) is one transaction in
the database, and gets the chat's next sequence number there. No change reaches this machine's
memory core when it is made: the core takes every change, this machine's too, from the chat's
feed, in sequence order (`follow`). Each machine's core so takes the same events in the same
order, and all hold the same tree and the same views.

What each core derives alike (free nodes) is written by the machine whose change made it, and
left alone by the others. A compaction runs only under a lease (`claim`), so that one machine
calls a model for a node; a second build that gets in anyway is refused by the database and
counted. Failures are counted for the chat, in the database: the third, on any machine, makes
a cut, which is a change like a build.

A turn's appends carry the epoch of the turn lock it took (`TurnFence`, set for the task that
runs the turn by `agent/sharing.py`); the database refuses them once another session has taken
the turn, and the fence is told it was lost.

The views are the chat's, not the machine's: their budget is a change in the stream (the first
open of a machine whose turn model asks for another budget makes it, and every machine folds it
where it stands), and the saved views name the change they were folded up to. A machine that
opens takes them with the tree as it stood at that change and folds the changes since, each
with what was built by then (`pgstore/opening.py`): it holds the views the others hold.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable, Iterable, Set
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evertalk.chat import Chat
from evertalk.memory import Budget, MemoryCore, Node
from evertalk.memory.core import FAILURES_BEFORE_CUT
from evertalk.memory.text import leaf_input, split_text, valid_unicode
from evertalk.memory.tree import BUILT, CUT, free_leaf
from evertalk.pgstore.chats import Change
from evertalk.pgstore.errors import StaleTurn
from evertalk.pgstore.follow import Follower
from evertalk.pgstore.session import PgSession
from evertalk.pgstore.storage import LEASE_SECONDS, PgStorage
from evertalk.store.errors import StoreError
from evertalk.store.message_log import NewMessage
from evertalk.store.secure import write_atomic
from evertalk.store.storage import ChatStorage

LEASES_READ_EVERY = 2.0
"""Seconds the other machines' leases are taken as read: a claim settles who builds anyway."""
ASKED_BUDGET = "budget.json"
"""In this machine's folder: the view budget its turn model asked the chat for last."""


@dataclass
class TurnFence:
    """A turn's hold on the chat: the epoch its lock was taken at, which its appends carry.
    `lose` says the lock is lost (its watcher saw it, or the database refused an append):
    `on_lost` is called once. Once the turn is over (`active` False) it fences nothing."""

    epoch: int
    on_lost: Callable[[], None]
    lost: bool = False
    active: bool = True

    def lose(self) -> None:
        if not self.lost:
            self.lost = True
            self.on_lost()


TURN: ContextVar[TurnFence | None] = ContextVar("evertalk_turn", default=None)
"""The turn the running task logs for, if any: appends made outside a turn carry no epoch."""


def machine_name(home: Path) -> str:
    """How this home on this machine is named to the others: the host, and the home when it is
    not the default one (two homes on one host are two machines of the chat)."""
    host = socket.gethostname() or "a machine"
    default = Path.home() / ".evertalk"
    return host if home.resolve() == default.resolve() else f"{host}:{home}"


class SharedChat(Chat):
    """The chat of a `PgStorage`, folded in from the chat's feed."""

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
        self._leased: Set[Node] = frozenset()
        self._leases_read = -float("inf")

    @classmethod
    def open_shared(
        cls,
        session: PgSession,
        folder: Path,
        *,
        readonly: bool = False,
        budget: Budget | None = None,
        lease_seconds: float = LEASE_SECONDS,
    ) -> SharedChat:
        """The chat of `session`'s database, with `folder` as this machine's place for it."""
        storage = PgStorage.open(session, folder, readonly=readonly, lease_seconds=lease_seconds)
        chat = cls.over(storage, readonly=readonly)  # with the chat's budget, saved with its views
        try:
            chat._fold_opening()
            if budget is not None and not readonly:
                chat._ask_budget(budget)
        except BaseException:
            chat.close()
            raise
        return chat

    def _fold_opening(self) -> None:
        """The changes made since the saved views, folded as every machine folded them. Their
        messages are not news to this machine's windows, which open after."""
        since, self._since_opened = self._since_opened, ()
        self.follower.feed(since, self._take)
        self.others.clear()
        self._save_if_due()

    def _ask_budget(self, budget: Budget) -> None:
        """Make this machine's budget the chat's when its turn model changed since it last
        asked (or it never did): machines whose models differ then do not undo each other's at
        every open. A failure only leaves the chat's budget as it is."""
        asked = budget.sizes()
        place = self.shared.path / ASKED_BUDGET
        before = _sizes_in(place)
        if asked == before:
            return
        try:
            if asked != self.core.budget.sizes():
                seq = self.shared.set_budget(asked)
                self._fold_own(seq, {"budget": list(asked)})
            write_atomic(place, json.dumps(list(asked)).encode("utf-8"), durable=False)
        except (StoreError, OSError) as error:
            self.warnings.append(f"memory: the view's budget was not changed: {error}")

    @property
    def kept_where(self) -> str:
        return f"the chat in the database at {self.shared.where}"

    @property
    def renew_every(self) -> float:
        """Seconds between two renewals of the claims whose calls run: a third of a lease, so
        that two may fail before it lapses."""
        return self.shared.lease_seconds / 3

    def renew(self, nodes: Iterable[Node]) -> None:
        """Claim again the nodes whose calls run here, so that no other machine takes them."""
        for node in nodes:
            self.shared.claim(node[0], node[1])

    @property
    def machine(self) -> str:
        return self.follower.machine

    # -- changes --------------------------------------------------------------------------

    def log_message(self, message: NewMessage) -> list[int]:
        self._writable()
        pages = split_text(valid_unicode(message.text))
        leaves = [free_leaf(leaf_input(message.kind, page)) for page in pages]
        fence = TURN.get()
        epoch = fence.epoch if fence is not None and fence.active else None
        with self._stops_on_failure():
            try:
                ids, seq = self.shared.log_pages(message, pages, leaves, epoch)
            except StaleTurn:
                if fence is not None:
                    fence.lose()
                raise
        if seq is not None:  # else its key was logged before: folded then
            self._own[ids[0]] = (message.kind, pages)
        self._fold_own(seq, {"append": [ids[0], len(ids)]})
        return ids

    def build(self, node: Node, text: str) -> None:
        self._writable()
        text = valid_unicode(text)
        if self.core.tree.is_built(node):
            return  # another machine's line got in first (its lease had lapsed)
        error = self.core.pending_error(node)
        if error:
            raise StoreError(error)
        self._put(node, text, BUILT)
        self.tick()

    def fail(self, node: Node) -> None:
        """One failed compaction, counted for the chat; the third, on whichever machine,
        cuts the node for every machine."""
        self._writable()
        self.follow()
        if self.core.tree.is_built(node):
            return  # another machine built it meanwhile
        if self.shared.count_failure(node[0], node[1]) < FAILURES_BEFORE_CUT:
            self.core.fail(node)  # this machine's count, below the chat's: never a cut
        else:
            self.cut(node)

    def ids_logged(self, key: str) -> list[int] | None:
        """The ids of the message logged with this idempotency key, or None."""
        return self.shared.logged_ids(key)

    def cut(self, node: Node) -> None:
        self._writable()
        self.follow()
        if self.core.tree.is_built(node):
            return
        error = self.core.pending_error(node)
        if error:
            raise StoreError(error)
        self._put(node, self.core.tree.cut_text(node), CUT)

    def resume_batch(self) -> bool:
        """Nothing: the views change at a message only, so that every machine's stay alike."""
        return False

    def _put(self, node: Node, text: str, flag: int) -> None:
        self._texts_built[node] = (text, flag)
        seq = None
        try:
            seq = self.shared.put_node((node[0], node[1], text, flag))
        finally:
            self._fold_own(seq, {"nodes": [list(node)]})
            self._texts_built.pop(node, None)

    # -- the feed ---------------------------------------------------------------------------

    def _fold_own(self, seq: int | None, what: dict[str, Any]) -> None:
        """Fold this machine's change `seq` at once when it is the next one, without reading
        the feed; else (others' changes came first, or nothing changed) read the feed."""
        if seq is not None and seq == self.follower.seq + 1:
            self.follower.fold_own(seq, what, self._take)
            self._save_if_due()
        else:
            self.follow()

    def _take(self, change: Change) -> list[int]:
        ids = self._fold(change)
        self.others += [(change.machine, i) for i in ids]
        return ids

    def follow(self) -> list[int]:
        """Fold in every change made since the last one folded, this machine's too, in order;
        the ids of the messages other machines logged (also added to `others`)."""
        changes = self.shared.changes_since(self.follower.seq)
        try:
            return [i for ids in self.follower.feed(changes, self._take) for i in ids]
        finally:
            self._save_if_due()

    def _fold(self, change: Change) -> list[int]:
        own = change.machine == self.machine
        what: dict[str, Any] = change.what
        if "append" in what:
            first, count = (int(n) for n in what["append"])
            self._fold_append(first, count)
            return [] if own else list(range(first, first + count))
        if "budget" in what:
            ceiling, floor, cceiling, cfloor = (int(n) for n in what["budget"])
            self.core.rebudget((ceiling, floor, cceiling, cfloor))
            self.checkpoints.changed(1)
            self._save_due = True
            return []
        for l, i in what.get("nodes", ()):  # noqa: E741
            self._fold_node((int(l), int(i)), derive=own)
        return []

    def _fold_append(self, first: int, count: int) -> None:
        mine = self._own.pop(first, None)
        if mine is not None:  # its free leaves were stored with it
            kind, pages = mine
            self._take_pages(kind, pages, stored=range(first, first + count))
            return
        records = self.shared.read_messages(first, first + count)
        if len(records) != count:
            raise StoreError(f"messages {first} … {first + count - 1} are not in the database")
        for record in records:
            self._take_pages(record.kind, [record.text], derive=False)

    def _fold_node(self, node: Node, *, derive: bool) -> None:
        if self.core.tree.is_built(node):
            return  # derived here already: a free parent
        mine = self._texts_built.get(node) if derive else None  # this machine's own line
        if mine is not None:
            text, flag = mine
        else:
            record = self.shared.read_node(node[0], node[1])
            if record is None:
                raise StoreError(f"node {node} is not in the database")
            text, flag = record.text, record.flag
        if flag == CUT:
            built = self.core.cut(node)[1:]
        elif flag == BUILT:
            built = self.core.build(node, text)
        else:
            return  # a free node the core derives as its halves are built
        if derive:
            self._persist(built)
        self._checkpoint_if_due()

    def _checkpoint_if_due(self) -> None:
        if self.checkpoints.due():
            self._save_due = True

    def _save_views_after_append(self) -> None:
        """Saved once the change is folded (`_save_if_due`): the views name their change."""
        self._save_due = True

    def _save_if_due(self) -> None:
        if self._save_due and not self.readonly and self.broken is None:
            self._save_due = False
            super()._save_views_after_append()

    def save_views(self) -> None:
        """Save the views, as folded up to the follower's change, if they changed since."""
        self._writable()
        if self.checkpoints.pending:
            self.shared.save_views(self.core.saved(), self.follower.seq)
            self.checkpoints.saved()

    def usage_copy(self) -> Callable[[str], None] | None:
        return self.shared.add_usage

    # -- leases -----------------------------------------------------------------------------

    def claim(self, node: Node) -> bool:
        taken = self.shared.claim(node[0], node[1])
        if not taken:  # another's, or the chat's leases are all out: not tried again at once
            self._leased = self._leased | {node}
        return taken

    def release(self, node: Node) -> None:
        self.shared.release(node[0], node[1])

    def leased_elsewhere(self) -> Set[Node]:
        """The nodes other machines hold a live lease on, as read at most a moment ago."""
        now = time.monotonic()
        if now - self._leases_read >= LEASES_READ_EVERY:
            self._leased = frozenset(
                (lease.l, lease.i)
                for lease in self.shared.live_leases()
                if lease.machine != self.machine
            )
            self._leases_read = now
        return self._leased

    def ready_leaves(self) -> list[int]:
        leased = self.leased_elsewhere()
        return [i for i in super().ready_leaves() if (0, i) not in leased]

    def batch_parents(self) -> list[Node]:
        leased = self.leased_elsewhere()
        return [node for node in super().batch_parents() if node not in leased]

    def first_merge(self, skip: set[Node]) -> Node | None:
        return super().first_merge(skip | set(self.leased_elsewhere()))


def _sizes_in(place: Path) -> tuple[int, int, int, int] | None:
    """The budget a machine asked for last, as `_ask_budget` keeps it; None if unknown."""
    try:
        sizes = json.loads(place.read_bytes())
    except (OSError, ValueError):
        return None
    if isinstance(sizes, list) and len(sizes) == 4 and all(type(n) is int for n in sizes):
        return (sizes[0], sizes[1], sizes[2], sizes[3])
    return None
