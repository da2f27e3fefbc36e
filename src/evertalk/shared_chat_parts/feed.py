"""`SharedFeed`: the chat's feed folded into this machine's core, in sequence order, this
machine's changes too (see shared_chat.py); and the views saved as folded."""

from __future__ import annotations

from collections.abc import Callable, Sequence, Set
from dataclasses import dataclass
from typing import Any, TypeVar

from evertalk.memory import Node
from evertalk.memory.tree import BUILT, CUT
from evertalk.pgstore.chats import Change
from evertalk.pgstore.pgchat import PgChat
from evertalk.pgstore.worker import on_event_loop
from evertalk.shared_chat_parts.state import SharedState
from evertalk.store.errors import StoreError
from evertalk.store.records import MessageRecord, NodeRecord

_T = TypeVar("_T")

FOLD_MOST = 1000
"""Changes folded from one read of the feed: a machine far behind catches up in steps."""


class SharedFeed(SharedState):
    """Changes read from the feed (or this machine's own, known without a read) taken by the
    core: appends, builds and cuts, budgets."""

    def _fold_own(self, seq: int | None, what: dict[str, Any]) -> None:
        """Fold this machine's change `seq` at once when it is the next one, without reading
        the feed; else (others' changes came first, or nothing changed) read the feed."""
        if seq is not None and seq == self.follower.seq + 1:
            self.follower.fold_own(seq, what, self._take)
            self._save_if_due()
        else:
            self.follow()

    async def _afold_own(self, seq: int | None, what: dict[str, Any]) -> None:
        if seq is not None and seq == self.follower.seq + 1:
            self.follower.fold_own(seq, what, self._take)
            self._save_if_due()
        else:
            await self.afollow()

    def _take(self, change: Change) -> list[int]:
        ids = self._fold(change)
        self.others += [(change.machine, i) for i in ids]
        return ids

    def follow(self) -> list[int]:
        """Fold in every change made since the last one folded, this machine's too, in order;
        the ids of the messages other machines logged (also added to `others`)."""
        seq, own = self.follower.seq, frozenset(self._own)
        return self._apply(self.shared.read(lambda chat: _read_batch(chat, seq, own)))

    async def afollow(self) -> list[int]:
        """`follow`, its reads made in the database's thread; a StoreError says why the
        database was not reached (and `reachable` says it until it is)."""
        seq, own = self.follower.seq, frozenset(self._own)
        return self._apply(await self._read(lambda chat: _read_batch(chat, seq, own)))

    async def _read(self, operation: Callable[[PgChat], _T]) -> _T:
        """`operation` in the database's thread, awaited; whether the database was reached is
        noted (`reachable`)."""
        try:
            found = await self.shared.call(operation)
        except StoreError as error:
            self._unreachable = str(error)
            raise
        self._unreachable = None
        return found

    def _apply(self, batch: _Batch) -> list[int]:
        self.kept.keep(batch.records)
        self._nodes_read = {(n.l, n.i): n for n in batch.nodes}
        try:
            return [i for ids in self.follower.feed(batch.changes, self._take) for i in ids]
        finally:
            self._nodes_read = {}
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
        ids = range(first, first + count)
        if self.kept.missing(ids):
            self.kept.keep(self.shared.read_messages(first, first + count))
        records = [self.kept.record(i) for i in ids]
        if any(record is None for record in records):
            raise StoreError(f"messages {first} … {first + count - 1} are not in the database")
        for record in records:
            assert record is not None
            self._take_pages(record.kind, [record.text], derive=False)

    def _fold_node(self, node: Node, *, derive: bool) -> None:
        if self.core.tree.is_built(node):
            return  # derived here already: a free parent
        mine = self._texts_built.get(node) if derive else None  # this machine's own line
        if mine is not None:
            text, flag = mine
        else:
            record = self._nodes_read.get(node) or self.shared.read_node(node[0], node[1])
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
        """Save the views, as folded up to the follower's change, if they changed since. On an
        event loop, in the database's thread in its turn: a failure only means a longer fold
        at the next open."""
        self._writable()
        if not self.checkpoints.pending:
            return
        saved, seq = self.core.saved(), self.follower.seq
        if on_event_loop():
            self.shared.submit(lambda chat: chat.save_views(saved, seq))
        else:
            self.shared.save_views(saved, seq)
        self.checkpoints.saved()


@dataclass(frozen=True)
class _Batch:
    """Changes read from the feed, with the messages and lines folding them needs."""

    changes: Sequence[Change]
    records: Sequence[MessageRecord]
    nodes: Sequence[NodeRecord]


def _read_batch(chat: PgChat, seq: int, own: Set[int]) -> _Batch:
    """The changes after `seq` (at most FOLD_MOST), and what they need read: the messages of
    appends but this machine's own (`own`: their first ids), the lines of builds."""
    changes = chat.changes_since(seq)[:FOLD_MOST]
    spans = [
        (int(c.what["append"][0]), int(c.what["append"][1])) for c in changes if "append" in c.what
    ]
    spans = [(first, count) for first, count in spans if first not in own]
    records: list[MessageRecord] = []
    if spans:
        records = chat.read_messages(spans[0][0], max(f + c for f, c in spans))
    wanted = [(int(l), int(i)) for c in changes for l, i in c.what.get("nodes", ())]  # noqa: E741
    return _Batch(changes, records, chat.read_node_list(wanted))
