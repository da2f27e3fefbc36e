"""`PgChat`: one chat in PostgreSQL, over one connection, as one machine (SPEC §13).

Appends, builds and cuts are transactions that hold the chat's row lock and bump its sequence
number (chats.py), each one statement: one round trip to the server, commit included. Their
commit is synchronous, and nothing returns before it. The methods mirror `ChatStore`'s where
both stores do the same thing, so that the store interface can be drawn from the two.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from evertalk.memory.core import SavedViews
from evertalk.memory.text import KINDS
from evertalk.memory.tree import BUILT, CUT
from evertalk.pgstore import chats, leases, messages, nodes
from evertalk.pgstore.chats import Change
from evertalk.pgstore.connect import Connection, driver_errors
from evertalk.pgstore.errors import PgStoreError, StaleTurn
from evertalk.pgstore.leases import LEASE_LIMIT, Lease
from evertalk.pgstore.nodes import NodeRow, NodeShape
from evertalk.pgstore.owner import check_owner
from evertalk.store.days import iso, local_now
from evertalk.store.message_log import NewMessage, PageStore, page_keys
from evertalk.store.records import MessageRecord, NodeRecord, Page
from evertalk.store.views import encode_views, parse_views


@dataclass(frozen=True)
class Snapshot:
    """The chat as of one moment: what an open builds its memory core from."""

    t: int
    seq: int
    shape: NodeShape
    views: SavedViews | str | None
    views_seq: int | None = None
    """The change the saved views were folded up to; None when none are saved, or when they
    were saved before the views named it."""
    changes: tuple[Change, ...] = ()
    """The changes after `views_seq`, in order: what an open folds after the saved views."""


class PgChat(PageStore):
    """The chat `name` of the connection's role, written as `machine`.

    One thread at a time per connection, as psycopg's connections are; two machines (or two
    connections) on one chat are what the row lock is for.
    """

    def __init__(self, conn: Connection, chat: int, name: str, machine: str) -> None:
        self.conn = conn
        self.chat = chat
        self.name = name
        self.machine = machine
        self._secret: str | None = None

    @classmethod
    def open(
        cls, conn: Connection, name: str = "main", *, machine: str, create: bool = True
    ) -> PgChat:
        """This role's chat `name` (created unless `create` is False)."""
        with driver_errors("open the chat"):
            check_owner(conn)
            chat = chats.find_chat(conn, name, create=create)
        if chat is None:
            raise PgStoreError(f"there is no chat {name!r} in the database")
        return cls(conn, chat, name, machine)

    @property
    def channel(self) -> str:
        """The channel a NOTIFY wakes its listeners on after each change (read once)."""
        if self._secret is None:
            with driver_errors("read the chat"):
                self._secret = chats.chat_secret(self.conn, self.chat)
        return chats.channel(self._secret)

    @property
    def message_count(self) -> int:
        """T: the number of messages logged, as committed now."""
        return self._numbers()[0]

    @property
    def seq(self) -> int:
        """The chat's sequence number: how many changes were made to it."""
        return self._numbers()[1]

    @property
    def refused(self) -> int:
        """How many builds were refused because their node was built already."""
        return self._numbers()[2]

    def _numbers(self) -> tuple[int, int, int]:
        with driver_errors("read the chat"):
            return chats.chat_numbers(self.conn, self.chat)

    # Appends

    def append_pages(self, message: NewMessage, pages: Sequence[str]) -> list[int]:
        """Log `message` as consecutive pages in one transaction; their ids (keys as in the file
        store)."""
        return self.log_pages(message, pages)[0]

    def log_pages(
        self,
        message: NewMessage,
        pages: Sequence[str],
        leaves: Sequence[str | None] = (),
        *,
        epoch: int | None = None,
    ) -> tuple[list[int], int | None]:
        """As `append_pages`, with the change's sequence number (None: the key was logged
        before, and nothing changed); `leaves`, the pages' free leaves, are stored with them.
        `epoch`: the turn's that logs it, if one does: StaleTurn, and nothing logged, when
        another session has taken the chat's turn since."""
        if message.kind not in KINDS:
            raise ValueError(f"unknown message kind {message.kind!r}")
        if not pages:
            raise ValueError("a message has at least one page")
        when = iso(message.date if message.date is not None else local_now())
        records = _pages(0, message, pages, when)  # their ids are the chat's next ones
        with driver_errors("log the message"):
            logged = messages.log_messages(
                self.conn,
                self.chat,
                self.machine,
                records,
                key=message.key,
                leaves=leaves,
                epoch=epoch,
            )
        if logged.stale:
            raise StaleTurn(
                "the message was not logged: another machine's turn has begun since this"
                " one's lock was lost"
            )
        assert logged.ids is not None  # logged now, or under its key before
        return logged.ids, logged.seq

    def insert_records(self, records: Sequence[MessageRecord]) -> int:
        """Log records as they are (their ids, dates, keys): the next ones of the chat, as a
        transfer copies them. Returns T after them."""
        if not records:
            return self.message_count
        with driver_errors("copy the messages"):
            logged = messages.log_messages(
                self.conn, self.chat, self.machine, records, numbered=True
            )
        count = logged.count
        if logged.ids is None:
            raise PgStoreError(
                f"messages {records[0].i} … {records[-1].i} do not follow the chat's"
                f" {count} messages"
            )
        return count + len(records)

    def logged(self, key: str) -> bool:
        """Whether a message was logged with this idempotency key."""
        return self.logged_ids(key) is not None

    def logged_ids(self, key: str) -> list[int] | None:
        """The ids of the message logged with this idempotency key, or None."""
        with driver_errors("read the chat"):
            return messages.logged_ids(self.conn, self.chat, key)

    def read_message(self, i: int) -> MessageRecord:
        found = self.read_messages(i, i + 1) if i >= 0 else []
        if not found:
            raise IndexError(f"there is no message {i} (T = {self.message_count})")
        return found[0]

    def read_messages(self, start: int, stop: int) -> list[MessageRecord]:
        """Messages start … stop - 1 (those that are logged), in order."""
        with driver_errors("read the messages"):
            return messages.read_messages(self.conn, self.chat, start, stop)

    # The tree

    def build(self, l: int, i: int, text: str, *, free: Sequence[NodeRow] = ()) -> bool:  # noqa: E741
        """Store node (l, i) as built by a model, with the free parents it completes; False
        (and counted) when the node was built already, by this machine or another."""
        return self._put((l, i, text, BUILT), free)

    def put_built(self, l: int, i: int, text: str, flag: int) -> int | None:  # noqa: E741
        """Store node (l, i) as built by a model (flag BUILT) or cut (CUT), alone; the
        change's sequence number, None when the node was built already."""
        with driver_errors("store the node"):
            return nodes.put_node(self.conn, self.chat, self.machine, [(l, i, text, flag)])

    def cut(self, l: int, i: int, text: str, *, free: Sequence[NodeRow] = ()) -> bool:  # noqa: E741
        """Store node (l, i) as cut (its input cut after the third failure, SPEC §2.5)."""
        return self._put((l, i, text, CUT), free)

    def _put(self, node: NodeRow, free: Sequence[NodeRow]) -> bool:
        """One statement under the chat's row lock: the nodes checked against T, the node
        written (or its refusal counted), its free parents, its lease ended, the change."""
        with driver_errors("store the node"):
            return nodes.put_node(self.conn, self.chat, self.machine, [node, *free]) is not None

    def count_failure(self, l: int, i: int) -> int:  # noqa: E741
        """One more failed compaction of node (l, i), whichever machine made it; how many the
        chat has counted (its build clears them)."""
        with driver_errors("count the failure"):
            return nodes.count_failure(self.conn, self.chat, l, i)

    def insert_nodes(self, records: Sequence[NodeRecord]) -> int:
        """Store the records' nodes not built yet, as a transfer copies them; how many."""
        rows = [(r.l, r.i, r.text, r.flag) for r in records]
        if not rows:
            return 0
        with driver_errors("copy the nodes"), chats.changing(self.conn, self.chat) as locked:
            for row in rows:
                nodes.check_node(row, locked.count)
            written = nodes.insert_nodes(self.conn, self.chat, rows)
            if written:
                what = {"nodes": [list(each) for each in written]}
                chats.record_change(self.conn, self.chat, self.machine, what, locked.count)
            return len(written)

    def put_derived(self, rows: Sequence[NodeRow]) -> None:
        """Store nodes every machine derives alike (free nodes): no change is recorded, and
        one stored already (by the machine whose change made it) is left as it is."""
        if rows:
            with driver_errors("store the free nodes"):
                nodes.insert_nodes(self.conn, self.chat, rows)

    def snapshot(self) -> Snapshot:
        """T, the sequence number, every node's size and flag, the saved views and the changes
        made since they were saved, as of one moment."""
        with driver_errors("read the chat"), self.conn.transaction():
            self.conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ READ ONLY")
            t, seq, _ = chats.chat_numbers(self.conn, self.chat)
            shape = nodes.node_shape(self.conn, self.chat, t)
            row = self._views_row()
            views = None if row is None else self._parsed(row[0])
            views_seq = None if row is None else row[1]
            changes: list[Change] = []
            if views_seq is not None:
                changes = chats.changes_since(self.conn, self.chat, views_seq)
        return Snapshot(t, seq, shape, views, views_seq, tuple(changes))

    def read_node(self, l: int, i: int) -> NodeRecord | None:  # noqa: E741
        """Node (l, i), or None when it is not built."""
        with driver_errors("read the node"):
            return nodes.read_node(self.conn, self.chat, l, i)

    def read_node_list(self, wanted: Sequence[tuple[int, int]]) -> list[NodeRecord]:
        """The nodes of `wanted` that are built, in one round trip, in no given order."""
        with driver_errors("read the nodes"):
            return nodes.read_node_list(self.conn, self.chat, wanted)

    def read_nodes(self, after: tuple[int, int] = (-1, -1), limit: int = 1000) -> list[NodeRecord]:
        """Up to `limit` nodes past `after`, in order of level, then index."""
        with driver_errors("read the nodes"):
            return nodes.read_nodes(self.conn, self.chat, after, limit)

    @property
    def node_count(self) -> int:
        """How many nodes are built."""
        with driver_errors("read the nodes"):
            row = self.conn.execute(
                "SELECT count(*) FROM evertalk.nodes WHERE chat = %s", (self.chat,)
            ).fetchone()
        return int(row[0]) if row is not None else 0

    def built_nodes(self) -> set[tuple[int, int]]:
        with driver_errors("read the nodes"):
            return nodes.built_nodes(self.conn, self.chat)

    # Other machines

    def changes_since(self, seq: int) -> list[Change]:
        """The changes made after sequence number `seq` (by any machine), in sequence order:
        what a service folds in before its own next change."""
        with driver_errors("read the chat's changes"):
            return chats.changes_since(self.conn, self.chat, seq)

    # Leases

    def claim(self, l: int, i: int, seconds: float, limit: int = LEASE_LIMIT) -> bool:  # noqa: E741
        """Take the lease on node (l, i) for `seconds` (see leases.py); whether it was taken."""
        if seconds <= 0:
            raise ValueError("a lease lasts a positive number of seconds")
        with driver_errors("claim the node"), chats.changing(self.conn, self.chat) as locked:
            nodes.check_node((l, i, "", BUILT), locked.count)
            return leases.claim_lease(self.conn, self.chat, (l, i), self.machine, seconds, limit)

    def release(self, l: int, i: int) -> bool:  # noqa: E741
        """Give up this machine's lease on (l, i) (its call failed); whether it held one."""
        with driver_errors("release the node"):
            return leases.release_lease(self.conn, self.chat, (l, i), self.machine)

    def live_leases(self) -> list[Lease]:
        with driver_errors("read the leases"):
            return leases.leases(self.conn, self.chat, live=True)

    def expired_leases(self) -> list[Lease]:
        """Leases whose machine let them lapse (it died mid-call): free for another to take."""
        with driver_errors("read the leases"):
            return leases.leases(self.conn, self.chat, live=False)

    # The ledger

    def add_usage(self, row: str) -> None:
        """Keep one model call's ledger record (JSON), as this machine made it."""
        with driver_errors("keep the ledger's record"):
            self.conn.execute(
                "INSERT INTO evertalk.ledger (chat, row)"
                " VALUES (%s, %s::jsonb || jsonb_build_object('machine', %s::text))",
                (self.chat, row, self.machine),
            )

    # Views

    def save_views(self, saved: SavedViews, seq: int | None = None) -> None:
        """Replace the chat's saved views (its view.json, SPEC §3.6) by the views as folded up
        to change `seq` (None: the chat's latest, as a copy of a whole chat saves them), unless
        they were saved at a later change already."""
        body = encode_views(saved).decode("utf-8")
        with driver_errors("save the views"):
            self.conn.execute(
                "INSERT INTO evertalk.views AS v (chat, body, t, seq) VALUES (%s, %s, %s,"
                " coalesce(%s, (SELECT c.seq FROM evertalk.chats AS c WHERE c.id = %s)))"
                " ON CONFLICT (chat) DO UPDATE SET body = excluded.body, t = excluded.t,"
                " seq = excluded.seq, saved = now() WHERE v.seq IS NULL OR v.seq <= excluded.seq",
                (self.chat, body, saved.t, seq, self.chat),
            )

    def load_views(self) -> SavedViews | str | None:
        """The saved views; None when there are none; an error string when they are unreadable."""
        row = self._views_row()
        return None if row is None else self._parsed(row[0])

    def _parsed(self, raw: bytes) -> SavedViews | str:
        try:
            return parse_views(raw)
        except (ValueError, RecursionError) as error:
            return f"the saved views of chat {self.name!r}: {error}"

    def views_body(self) -> bytes | None:
        """The saved views as view.json holds them, or None."""
        row = self._views_row()
        return None if row is None else row[0]

    def _views_row(self) -> tuple[bytes, int | None] | None:
        with driver_errors("read the views"):
            row = self.conn.execute(
                "SELECT body, seq FROM evertalk.views WHERE chat = %s", (self.chat,)
            ).fetchone()
        if row is None:
            return None
        return str(row[0]).encode("utf-8"), None if row[1] is None else int(row[1])

    # The view's budget

    def set_budget(self, sizes: tuple[int, int, int, int]) -> int:
        """Make `sizes` the views' budget (`Budget.sizes`): a change of the chat, which every
        machine folds where it stands in the stream; its sequence number."""
        what = {"budget": list(sizes)}
        with (
            driver_errors("change the views' budget"),
            chats.changing(self.conn, self.chat) as locked,
        ):
            return chats.record_change(self.conn, self.chat, self.machine, what, locked.count)


def logged_records(first: int, message: NewMessage, pages: Sequence[str]) -> list[MessageRecord]:
    """The records `log_pages` logged for a dated message whose first page got id `first`."""
    assert message.date is not None, "an undated message is dated as it is logged"
    return _pages(first, message, pages, iso(message.date))


def _pages(first: int, message: NewMessage, pages: Sequence[str], when: str) -> list[MessageRecord]:
    """The records of one message's pages, from id `first` on (as the file store writes them)."""
    count = len(pages)
    images = message.images
    records = []
    for n, (text, key) in enumerate(zip(pages, page_keys(message.key, count), strict=True)):
        records.append(
            MessageRecord(
                first + n,
                message.kind,
                text,
                len(text.encode("utf-8")),
                when,
                key=key,
                images=tuple(images) if images is not None and n == 0 else None,
                agent=message.agent,
                page=Page(n, count) if count > 1 else None,
                failed=message.failed,
            )
        )
    return records
