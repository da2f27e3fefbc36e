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

No database call runs on the service's event loop: the chat's connection has a thread of its
own (`pgstore/worker.py`), and the service awaits the calls that change or read the chat
(`alog_message`, `abuild`, `aclaim`, `afollow`, …); the core is changed on the loop only, with
what the thread read. A turn's messages are queued and logged in order by a writer
(`shared_log.py`), as its stream goes on; what the windows read next (the latest messages,
the lines of the view) is kept or read ahead (`shared_kept.py`, `aread_records`, …). Called and
waited for on an event loop's thread, the plain methods still work, but stop the loop: the
tests look for any such call (`worker.LOOP_CALLS`).

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
from collections.abc import Callable, Iterable, Iterator, Sequence, Set
from concurrent.futures import Future
from contextlib import contextmanager, suppress
from contextvars import ContextVar
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, TypeVar

import anyio

from evertalk.chat import Chat
from evertalk.memory import Budget, MemoryCore, Node
from evertalk.memory.core import FAILURES_BEFORE_CUT
from evertalk.memory.text import leaf_input, split_text, valid_unicode
from evertalk.memory.tree import BUILT, CUT, Built, free_leaf
from evertalk.pgstore.chats import Change
from evertalk.pgstore.errors import StaleTurn
from evertalk.pgstore.follow import Follower
from evertalk.pgstore.leases import Lease
from evertalk.pgstore.pgchat import PgChat, logged_records
from evertalk.pgstore.session import PgSession
from evertalk.pgstore.storage import LEASE_SECONDS, PgStorage
from evertalk.pgstore.worker import on_event_loop
from evertalk.shared_kept import Kept
from evertalk.shared_log import Queued, QueuedLog, Writer
from evertalk.store.days import local_now
from evertalk.store.errors import StoreError
from evertalk.store.message_log import MessageLog, NewMessage
from evertalk.store.records import MessageRecord, NodeRecord
from evertalk.store.secure import write_atomic
from evertalk.store.storage import ChatStorage

_T = TypeVar("_T")

LEASES_READ_EVERY = 2.0
"""Seconds the other machines' leases are taken as read: a claim settles who builds anyway."""
ASKED_BUDGET = "budget.json"
"""In this machine's folder: the view budget its turn model asked the chat for last."""
FOLD_MOST = 1000
"""Changes folded from one read of the feed: a machine far behind catches up in steps."""
READ_AHEAD_MOST = 2000
"""Messages read ahead at once (a window's `records` takes as many)."""
READY_SECONDS = 5.0
"""How long a message waits for the database to answer before it is refused (not held)."""


@dataclass
class TurnFence:
    """A turn's hold on the chat: the epoch its lock was taken at, which its appends carry.
    `lose` says the lock is lost (its watcher saw it, or the database refused an append):
    `on_lost` is called once, on the event loop, as it cancels the turn: a refusal comes back
    there from the database's thread (`_told`). Once the turn is over (`active` False) it
    fences nothing."""

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
        self._nodes_read: dict[Node, NodeRecord] = {}  # read for the changes being folded
        self._leased: Set[Node] = frozenset()
        self._leases_read = -float("inf")
        self._leases_job: Future[list[Lease]] | None = None
        self.kept = Kept()
        self.writer = Writer(self._write_queued)
        """Logs what the turns queue (`turn_log`): the service runs it (`agent/sharing.py`)."""
        self._unreachable: str | None = None  # why the database was not reached, last time

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
        """The chat of `session`'s database, with `folder` as this machine's place for it. It
        waits for the database: a service opens it in a worker thread."""
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

    async def arenew(self, nodes: Iterable[Node]) -> None:
        wanted, seconds = list(nodes), self.shared.lease_seconds
        await self.shared.call(lambda chat: [chat.claim(n[0], n[1], seconds) for n in wanted])

    @property
    def machine(self) -> str:
        return self.follower.machine

    # -- logging --------------------------------------------------------------------------

    def log_message(self, message: NewMessage) -> list[int]:
        self._writable()
        message, pages, leaves = _prepared(message)
        fence = TURN.get()
        epoch = fence.epoch if fence is not None and fence.active else None
        with self._stops_on_failure(), _told(fence):
            ids, seq = self.shared.log_pages(message, pages, leaves, epoch)
        self._logged_now(message, pages, ids, seq)
        self._fold_own(seq, {"append": [ids[0], len(ids)]})
        return ids

    async def alog_message(self, message: NewMessage) -> list[int]:
        self._writable()
        fence = TURN.get()
        epoch = fence.epoch if fence is not None and fence.active else None
        return await self._alog(message, fence, epoch)

    async def _alog(
        self, message: NewMessage, fence: TurnFence | None, epoch: int | None
    ) -> list[int]:
        message, pages, leaves = _prepared(message)
        with self._stops_on_failure(), _told(fence):
            ids, seq = await self.shared.alog_pages(message, pages, leaves, epoch)
        self._logged_now(message, pages, ids, seq)
        await self._afold_own(seq, {"append": [ids[0], len(ids)]})
        return ids

    def _logged_now(
        self, message: NewMessage, pages: list[str], ids: list[int], seq: int | None
    ) -> None:
        """What this machine knows of a message it logged: its pages, to fold it without a
        read; its records, for the windows; its key."""
        if message.key is not None:
            self.kept.key(message.key, True)
        if seq is None:
            return  # its key was logged before: folded then
        if ids[0] >= self.core.t:  # else the feed brought it first
            self._own[ids[0]] = (message.kind, pages)
        self.kept.keep(logged_records(ids[0], message, pages))

    def turn_log(self) -> MessageLog:
        """The turns' log: queued, logged by `writer` in order (`shared_log.py`)."""
        return QueuedLog(self.queue_message, self.flushed)

    def queue_message(self, message: NewMessage) -> None:
        self._writable()
        fence = TURN.get()
        epoch = fence.epoch if fence is not None and fence.active else None
        self.writer.put(Queued(_dated(message), fence, epoch))

    async def _write_queued(self, item: Queued) -> None:
        fence = item.fence
        assert fence is None or isinstance(fence, TurnFence)
        await self._alog(item.message, fence, item.epoch)

    async def flushed(self) -> None:
        await self.writer.flushed()

    # -- building ---------------------------------------------------------------------------

    def build(self, node: Node, text: str) -> None:
        self._writable()
        text = valid_unicode(text)
        if self._built_or_refused(node):
            return
        self._put(node, text, BUILT)
        self.tick()

    async def abuild(self, node: Node, text: str) -> None:
        self._writable()
        text = valid_unicode(text)
        if self._built_or_refused(node):
            return
        await self._aput(node, text, BUILT)
        self.tick()

    def _built_or_refused(self, node: Node) -> bool:
        if self.core.tree.is_built(node):
            return True  # another machine's line got in first (its lease had lapsed)
        error = self.core.pending_error(node)
        if error:
            raise StoreError(error)
        return False

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

    async def afail(self, node: Node) -> None:
        self._writable()
        await self.afollow()
        if self.core.tree.is_built(node):
            return
        l, i = node  # noqa: E741
        count = await self.shared.call(lambda chat: chat.count_failure(l, i), idempotent=False)
        if count < FAILURES_BEFORE_CUT:
            self.core.fail(node)
        else:
            await self.acut(node)

    def ids_logged(self, key: str) -> list[int] | None:
        """The ids of the message logged with this idempotency key, or None."""
        return self.shared.logged_ids(key)

    def cut(self, node: Node) -> None:
        self._writable()
        self.follow()
        if self._built_or_refused(node):
            return
        self._put(node, self.core.tree.cut_text(node), CUT)

    async def acut(self, node: Node) -> None:
        self._writable()
        await self.afollow()
        if self._built_or_refused(node):
            return
        await self._aput(node, self.core.tree.cut_text(node), CUT)

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

    async def _aput(self, node: Node, text: str, flag: int) -> None:
        self._texts_built[node] = (text, flag)
        l, i = node  # noqa: E741
        try:
            try:
                seq = await self.shared.call(lambda chat: chat.put_built(l, i, text, flag))
            except StoreError:
                with suppress(StoreError):
                    await self.afollow()  # the line may have got in before the reply was lost
                raise
            await self._afold_own(seq, {"nodes": [list(node)]})
        finally:
            self._texts_built.pop(node, None)

    def _persist(self, built: list[Built]) -> None:
        """Free nodes, which every machine derives alike: on an event loop, written in the
        database's thread in their turn. One lost is no loss (a machine that opens derives it
        again), so a failure is not waited for."""
        if built and on_event_loop():
            rows = [(b.level, b.index, b.text, b.flag) for b in built]
            self.shared.submit(lambda chat: chat.put_derived(rows))
            return
        super()._persist(built)

    # -- the feed ---------------------------------------------------------------------------

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

    def usage_copy(self) -> Callable[[str], None] | None:
        return self._copy_usage

    def _copy_usage(self, row: str) -> None:
        """A model call's ledger record in the database too; on an event loop, not waited for
        (the home's ledger has it)."""
        if on_event_loop():
            self.shared.submit(lambda chat: chat.add_usage(row), idempotent=False)
        else:
            self.shared.add_usage(row)

    # -- reading ahead ----------------------------------------------------------------------

    def record(self, i: int) -> MessageRecord:
        found = self.kept.record(i)
        if found is not None:
            return found
        self._not_waited_for()
        record = super().record(i)
        self.kept.keep([record])
        return record

    def text_of(self, node: Node) -> str | None:
        if node not in self._texts and self.core.tree.text_of(node) is None:
            self._not_waited_for()
        return super().text_of(node)

    def _not_waited_for(self) -> None:
        """On an event loop, a read the database was found unable to answer is not waited for:
        a StoreError at once."""
        if self._unreachable is not None and on_event_loop():
            raise StoreError(self._unreachable)

    def logged(self, key: str) -> bool:
        known = self.kept.logged(key)
        if known is not None:
            return known
        self._not_waited_for()
        return super().logged(key)

    def reachable(self) -> None:
        if self._unreachable is not None:
            raise StoreError(self._unreachable)

    async def aready(self, key: str | None = None) -> None:
        """The database answers (its changes folded), within READY_SECONDS; and `key` is
        looked up. A StoreError, one line, when not: the message is not held."""
        with anyio.move_on_after(READY_SECONDS):
            await self.afollow()
            if key is not None:
                await self.alogged_keys([key])
            return
        self._unreachable = (
            f"the database at {self.shared.where} did not answer within {READY_SECONDS:g} s"
        )
        raise StoreError(self._unreachable)

    async def aread_records(self, start: int, stop: int) -> None:
        wanted = self.kept.missing(range(max(0, start), min(stop, self.core.t)))
        if wanted:
            low, high = wanted[0], min(wanted[-1] + 1, wanted[0] + READ_AHEAD_MOST)
            self.kept.keep(await self._read(lambda chat: chat.read_messages(low, high)))

    async def aread_texts(self, nodes: Iterable[Node]) -> None:
        wanted = self._texts_to_read(nodes)
        if wanted:
            found = await self._read(lambda chat: chat.read_node_list(wanted))
            for record in found:
                self._keep_text((record.l, record.i), record.text)

    async def aread_inputs(self, node: Node) -> None:
        level, index = node
        if level == 0:
            await self.aread_records(index, index + 1)
        halves = [(level - 1, 2 * index), (level - 1, 2 * index + 1)] if level else []
        await self.aread_texts([*halves, *self.core.context(node)])

    async def aread_zoom(self, start: int, count: int) -> None:
        if count == 1:
            await self.aread_records(start, start + 1)
        elif count > 1 and not count & (count - 1) and start >= 0 and not start % count:
            level, index = count.bit_length() - 1, start // count
            await self.aread_texts([(level - 1, 2 * index), (level - 1, 2 * index + 1)])

    async def alogged_keys(self, keys: Iterable[str]) -> None:
        wanted = [key for key in keys if self.kept.logged(key) is not True]
        if wanted:
            found = await self._read(lambda chat: [chat.logged(key) for key in wanted])
            for key, logged in zip(wanted, found, strict=True):
                self.kept.key(key, logged)

    # -- leases -----------------------------------------------------------------------------

    def claim(self, node: Node) -> bool:
        return self._claimed(node, self.shared.claim(node[0], node[1]))

    async def aclaim(self, node: Node) -> bool:
        l, i, seconds = node[0], node[1], self.shared.lease_seconds  # noqa: E741
        return self._claimed(node, await self.shared.call(lambda chat: chat.claim(l, i, seconds)))

    def _claimed(self, node: Node, taken: bool) -> bool:
        if not taken:  # another's, or the chat's leases are all out: not tried again at once
            self._leased = self._leased | {node}
        return taken

    def release(self, node: Node) -> None:
        """On an event loop, in the database's thread, not waited for: a lease not released
        lapses by itself."""
        l, i = node  # noqa: E741
        if on_event_loop():
            self.shared.submit(lambda chat: chat.release(l, i))
        else:
            self.shared.release(l, i)

    def leased_elsewhere(self) -> Set[Node]:
        """The nodes other machines hold a live lease on, as read at most a moment ago (on an
        event loop, as last read: the next read is made in the database's thread)."""
        now = time.monotonic()
        if now - self._leases_read >= LEASES_READ_EVERY:
            self._leases_read = now
            if not on_event_loop():
                self._leased = self._others(self.shared.live_leases())
            elif self._leases_job is None or self._leases_job.done():
                self._leases_job = self.shared.submit(PgChat.live_leases)
                self._leases_job.add_done_callback(self._leases_came)
        return self._leased

    def _leases_came(self, job: Future[list[Lease]]) -> None:
        if not job.cancelled() and job.exception() is None:
            self._leased = self._others(job.result())  # one assignment: whole or not at all

    def _others(self, leases: Iterable[Lease]) -> Set[Node]:
        return frozenset((lease.l, lease.i) for lease in leases if lease.machine != self.machine)

    def ready_leaves(self) -> list[int]:
        leased = self.leased_elsewhere()
        return [i for i in super().ready_leaves() if (0, i) not in leased]

    def batch_parents(self) -> list[Node]:
        leased = self.leased_elsewhere()
        return [node for node in super().batch_parents() if node not in leased]

    def first_merge(self, skip: set[Node]) -> Node | None:
        return super().first_merge(skip | set(self.leased_elsewhere()))


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


def _prepared(message: NewMessage) -> tuple[NewMessage, list[str], list[str | None]]:
    """The message dated (as the records kept of it say), its pages and their free leaves."""
    pages = split_text(valid_unicode(message.text))
    leaves = [free_leaf(leaf_input(message.kind, page)) for page in pages]
    return _dated(message), pages, leaves


def _dated(message: NewMessage) -> NewMessage:
    """Dated now if it is not: a queued message keeps the time the turn logged it."""
    return message if message.date is not None else replace(message, date=local_now())


@contextmanager
def _told(fence: TurnFence | None) -> Iterator[None]:
    """A refusal of a stale turn's append tells the turn (on the event loop, where it runs)."""
    try:
        yield
    except StaleTurn:
        if fence is not None:
            fence.lose()
        raise


def _sizes_in(place: Path) -> tuple[int, int, int, int] | None:
    """The budget a machine asked for last, as `_ask_budget` keeps it; None if unknown."""
    try:
        sizes = json.loads(place.read_bytes())
    except (OSError, ValueError):
        return None
    if isinstance(sizes, list) and len(sizes) == 4 and all(type(n) is int for n in sizes):
        return (sizes[0], sizes[1], sizes[2], sizes[3])
    return None
