"""The search index: `index/search.sqlite`, an SQLite FTS5 table over the messages and the
summaries the model wrote.

Derived like the rest of `index/`: it records how far it has read (the message count with
fingerprints of the first and last messages, and per tree file the offset read with a hash of
the bytes before it), checks that against the log before trusting it, and starts over when the
log no longer matches or the file is damaged. Nothing here costs an fsync: a crash loses at most
what the next catch-up reads again. Several processes may catch it up at once (the service as
it logs, `evertalk memory search` in another terminal): SQLite's own locks order them, each
batch is one transaction that reads the progress it extends, and the chat's lock is not
involved. The file itself is search_db.py's.

Free and cut nodes are not indexed: their texts are copies of messages or summaries that are.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from evertalk.memory.nodes import Node
from evertalk.memory.tree import BUILT
from evertalk.search.query import (
    END,
    MARK,
    message_rowid,
    node_rowid,
    quoted,
    snippet,
    text_length,
    tf_score,
)
from evertalk.store.chat_dir import ChatStore
from evertalk.store.checkpoint import INDEX_DIR, TREE
from evertalk.store.days import list_day_files
from evertalk.store.errors import StoreError
from evertalk.store.jsonl import Scan
from evertalk.store.line_files import parse_object
from evertalk.store.meta import tail_hash
from evertalk.store.records import MessageRecord, decode_node
from evertalk.store.rewrite import Rewrite
from evertalk.store.search_db import (
    HITS_SCHEMA,
    WAIT_S,
    Outdated,
    cannot_write,
    connect,
    damaged,
    locked,
    remove,
    why,
)
from evertalk.store.secure import make_dir
from evertalk.store.sqlite_lib import SECURE_DELETE, sqlite3

SEARCH_NAME = "search.sqlite"
BATCH = 20_000
"""Records per transaction of a catch-up: the write lock is let go between two, so that a
search in the service waits at most one batch of another process (its updates on the hot path
never wait: see follow)."""
FOLLOW = 64
"""Records at most that one update on the hot path adds: a backlog drains a little at each
message, and a search catches up the rest."""
COMMON = 10_000
"""Matches that make a token common. BM25 reads every match of every token of a query (to
weigh its rarity): at a million messages, 0.1 s for a common word and 0.3 s for a phrase of
common words. A query whose tokens are all rarer is ranked by BM25; else see CANDIDATES."""
CANDIDATES = 500
"""The newest matches of each tier that are ranked when a token is common (tf_score)."""

Report = Callable[[str, int, int], None]
"""Told (what, done, total) as a long catch-up goes: `messages` by count, `summaries` by bytes."""


@dataclass(frozen=True)
class Hit:
    rowid: int
    tier: int
    """0: the words as one phrase; 1: all the words (see search.query.tiers)."""
    kind: str
    """The message's kind, or `summary`."""
    snippet: str


@dataclass(frozen=True)
class Found:
    hits: list[Hit]
    capped: bool
    """More matches than were ranked (CANDIDATES in a tier): older ones may rank higher."""


class SearchIndex:
    def __init__(self, path: Path, conn: sqlite3.Connection, warnings: list[str]) -> None:
        self.path = path
        self.conn = conn
        self.warnings = warnings
        self._checked = False  # the progress was checked against the log by this process

    @classmethod
    def open(cls, chat_dir: Path, warnings: list[str] | None = None) -> SearchIndex:
        """Open (or create) the index of the chat at `chat_dir`. A damaged file is replaced,
        with a warning (added to `warnings`); a file that cannot be written is a StoreError."""
        folder = chat_dir / INDEX_DIR
        path = folder / SEARCH_NAME
        warnings = [] if warnings is None else warnings
        try:
            make_dir(folder)
            try:
                conn = connect(path)
            except sqlite3.DatabaseError as error:
                if isinstance(error, sqlite3.OperationalError) and cannot_write(error):
                    raise
                state = "is outdated" if isinstance(error, Outdated) else "was damaged"
                warnings.append(f"{path} {state} ({error}); building it again")
                remove(path)
                conn = connect(path)
        except (sqlite3.Error, OSError) as error:
            raise StoreError(f"cannot open the search index {path}: {why(error)}") from None
        return cls(path, conn, warnings)

    def close(self) -> None:
        self.conn.close()

    def recover(self, error: sqlite3.DatabaseError) -> None:
        """After `error` from a file found damaged in use: build it again from nothing. An
        error that says nothing of the file (busy, read-only, disk full) is a StoreError."""
        if not damaged(error):
            raise StoreError(f"cannot use the search index {self.path}: {error}") from None
        self._warn_once(f"{self.path} was damaged ({error}); building it again")
        self.conn.close()
        remove(self.path)
        try:
            self.conn = connect(self.path)
        except (sqlite3.Error, OSError) as again:
            raise StoreError(f"cannot open the search index {self.path}: {why(again)}") from None
        self._checked = False

    # -- catching up --------------------------------------------------------------------------

    def behind(self, store: ChatStore) -> int:
        """Messages not indexed yet (the summaries' backlog is not counted: it follows)."""
        return max(0, store.message_count - self._messages())

    def catch_up(self, store: ChatStore, report: Report | None = None) -> int:
        """Index everything the log holds and the index does not; returns the records added."""
        added = 0
        self.conn.execute(f"PRAGMA busy_timeout = {int(WAIT_S * 1000)}")
        while True:
            step = self._batch(store, BATCH, report)
            if step is None or step == 0:
                return added
            added += step

    def follow(self, store: ChatStore) -> None:
        """Index the newest records on the hot path: a few at most, never waiting for another
        process's batch (the next call or search takes them), never raising."""
        try:
            self.conn.execute("PRAGMA busy_timeout = 0")
            self._batch(store, FOLLOW, None)
        except (sqlite3.Error, OSError, StoreError) as error:
            if not locked(error):
                self._warn_once(f"the search index was not updated: {why(error)}")

    def _batch(self, store: ChatStore, budget: int, report: Report | None) -> int | None:
        """One transaction: check, then add up to `budget` records. None when nothing was new."""
        conn = self.conn
        conn.execute("BEGIN IMMEDIATE")
        try:
            if not self._checked:
                self._check(store)
            elif self._messages() > store.message_count and not store.readonly:
                self._reset("it holds more messages than the log")
            added = self._add_messages(store, budget, report)
            added += self._add_nodes(store, budget - added, report)
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        conn.execute("COMMIT")
        self._checked = True
        return added or None

    def _check(self, store: ChatStore) -> None:
        """Start over unless what was indexed is still in the log, as it was then. An index
        ahead of a read-only store is no surprise: the service indexed what it logged since
        this reader opened the chat (only the chat's owner knows how long the log is)."""
        count, known = self._messages(), store.message_count
        if count and known and self._state("first") != _fingerprint(store, 0):
            return self._reset("message 0 is not what it was")
        if count > known and not store.readonly:
            return self._reset("it holds more messages than the log")
        if 0 < count <= known and self._state("last") != _fingerprint(store, count - 1):
            return self._reset(f"message {count - 1} is not what it was")
        tree = store.path / TREE
        for name, offset, tail in self.conn.execute("SELECT name, offset, tail FROM files"):
            path = tree / name
            try:
                same = path.stat().st_size >= offset and tail_hash(path, offset) == tail
            except OSError:
                same = False
            if not same:
                return self._reset(f"tree/{name} changed")
        return None

    def _reset(self, why: str) -> None:
        self._warn_once(f"the search index did not match the chat ({why}); building it again")
        conn = self.conn
        conn.execute("DROP TABLE IF EXISTS hits")
        conn.execute("DELETE FROM files")
        conn.execute("DELETE FROM state WHERE key != 'version'")
        conn.execute(HITS_SCHEMA)

    def _add_messages(self, store: ChatStore, budget: int, report: Report | None) -> int:
        start = self._messages()
        end = min(store.message_count, start + budget)
        if end <= start:
            return 0
        rows = []
        for i in range(start, end):
            record = store.read_message(i)
            rows.append((message_rowid(i), record.text, record.kind))
            if i == 0:
                self._set_state("first", _fingerprint_of(record))
        self.conn.executemany("INSERT INTO hits (rowid, text, kind) VALUES (?, ?, ?)", rows)
        self._set_state("messages", str(end))
        self._set_state("last", _fingerprint_of(record))
        if report is not None:
            report("messages", end, store.message_count)
        return end - start

    def _add_nodes(self, store: ChatStore, budget: int, report: Report | None) -> int:
        """The model's summaries from each tree file's unread lines, up to about `budget`."""
        if budget <= 0:
            return 0
        tree = store.path / TREE
        read = dict(self.conn.execute("SELECT name, offset FROM files").fetchall())
        added = 0
        for name in list_day_files(tree):
            path = tree / name
            offset = read.get(name, 0)
            if path.stat().st_size <= offset:
                continue
            end = offset
            for after, lines, rows in _node_rows(path, offset, budget - added):
                self._insert_nodes(rows)
                added += lines
                end = after
            if end > offset:
                self.conn.execute(
                    "INSERT OR REPLACE INTO files (name, offset, tail) VALUES (?, ?, ?)",
                    (name, end, tail_hash(path, end)),
                )
                if report is not None:
                    report("summaries", end, path.stat().st_size)
            if added >= budget:
                break
        return added

    def _insert_nodes(self, rows: list[tuple[int, str]]) -> None:
        """Insert the summaries; a second record of a node is ignored (SPEC §2.2). Such a
        record is rare, so a batch is inserted whole first and row by row only if it holds one
        (FTS5 has no INSERT OR IGNORE)."""
        insert = "INSERT INTO hits (rowid, text, kind) VALUES (?, ?, 'summary')"
        conn = self.conn
        conn.execute("SAVEPOINT nodes")
        try:
            conn.executemany(insert, rows)
        except sqlite3.IntegrityError:
            conn.execute("ROLLBACK TO nodes")
            for row in rows:
                if not conn.execute("SELECT 1 FROM hits WHERE rowid = ?", row[:1]).fetchone():
                    conn.execute(insert, row)
        conn.execute("RELEASE nodes")

    # -- forgetting (SPEC §12) -----------------------------------------------------------------

    def hold(self, store: ChatStore) -> None:
        """Take the write lock before a forget rewrites the log and tree files, so that no
        other process's catch-up reads them halfway, and check the index against the files
        as they are: one that no longer matches them (a forget cut short by a crash rewrote
        them under it) is emptied, since what it holds can no longer be found to be taken
        out. `forget` or `release` lets the lock go."""
        self.conn.execute(f"PRAGMA busy_timeout = {int(WAIT_S * 1000)}")
        self.conn.execute("BEGIN IMMEDIATE")
        try:
            self._check(store)
        except BaseException:
            self.release()
            raise

    def release(self) -> None:
        if self.conn.in_transaction:
            self.conn.execute("ROLLBACK")

    def forget(
        self, store: ChatStore, messages: list[int], nodes: list[Node], rewrites: list[Rewrite]
    ) -> None:
        """After a forget rewrote the files (the store follows them already): each changed
        message's row holds its new text, the dropped nodes' rows go, each rewritten tree
        file's offset moves with the lines that went, and the file is compacted so that none
        of its files, the write-ahead log included, holds the old text any more."""
        conn = self.conn
        try:
            count = self._messages()
            for i in (i for i in messages if i < count):
                record = store.read_message(i)
                conn.execute("DELETE FROM hits WHERE rowid = ?", (message_rowid(i),))
                conn.execute(
                    "INSERT INTO hits (rowid, text, kind) VALUES (?, ?, ?)",
                    (message_rowid(i), record.text, record.kind),
                )
                for key, at in (("first", 0), ("last", count - 1)):
                    if i == at:
                        self._set_state(key, _fingerprint_of(record))
            rows = [(node_rowid(level, i),) for level, i in nodes]
            conn.executemany("DELETE FROM hits WHERE rowid = ?", rows)
            self._move_offsets(store.path / TREE, rewrites)
        except BaseException:
            self.release()
            raise
        conn.execute("COMMIT")
        self.compact()

    def _move_offsets(self, tree: Path, rewrites: list[Rewrite]) -> None:
        read = dict(self.conn.execute("SELECT name, offset FROM files").fetchall())
        for rewrite in rewrites:
            name = rewrite.name.removeprefix(TREE + "/")
            if name in read and rewrite.name.startswith(TREE + "/"):
                offset = rewrite.moved(int(read[name]))
                self.conn.execute(
                    "UPDATE files SET offset = ?, tail = ? WHERE name = ?",
                    (offset, tail_hash(tree / name, offset), name),
                )

    def compact(self) -> None:
        """Make sure no page of the file holds a deleted row's words, then empty the write-ahead
        log, which held the pages as they were written. FTS5's secure-delete (search_db) took
        them out of the index as the rows went; an SQLite too old for it leaves them in the old
        segments until the whole index is merged into one. The pages freed are overwritten
        with zeros (search_db), so no VACUUM: at a million messages it would double the
        time."""
        if not SECURE_DELETE:
            self.conn.execute("INSERT INTO hits (hits) VALUES ('optimize')")
        busy = self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
        if busy:
            raise StoreError(f"another reader kept the write-ahead log of {self.path} in use")

    # -- searching ----------------------------------------------------------------------------

    def search(self, tiers: list[str], tokens: list[str], limit: int) -> Found:
        """The best `limit` hits, tier by tier (see search.query.tiers), newer first on a tie
        within one: by BM25 when every token of the query is rare enough to afford it, else
        among the tier's newest matches by term frequency."""
        exact = not any(self._common(token) for token in set(tokens))
        hits: list[Hit] = []
        seen: set[int] = set()
        capped = False
        for tier, match in enumerate(tiers):
            if exact:
                rows = self._by_bm25(match, limit + len(seen))
            else:
                rows = self._by_frequency(match)
                capped |= len(rows) == CANDIDATES
            for rowid, kind, marked in rows:
                if rowid not in seen and len(hits) < limit:
                    seen.add(rowid)
                    hits.append(Hit(rowid, tier, kind, snippet(marked)))
            if len(hits) >= limit:
                break
        return Found(hits, capped)

    def _common(self, token: str) -> bool:
        rows = self.conn.execute(
            "SELECT count(*) FROM (SELECT rowid FROM hits WHERE hits MATCH ? "
            "ORDER BY rowid DESC LIMIT ?)",
            (quoted(token), COMMON),
        ).fetchone()
        return int(rows[0]) >= COMMON

    def _by_bm25(self, match: str, limit: int) -> list[tuple[int, str, str]]:
        return self._rows(_MARKED + "ORDER BY bm25(hits), rowid DESC LIMIT ?", match, limit)

    def _by_frequency(self, match: str) -> list[tuple[int, str, str]]:
        rows = self._rows(_MARKED + "ORDER BY rowid DESC LIMIT ?", match, CANDIDATES)
        if not rows:
            return []
        lengths = [text_length(marked) for _, _, marked in rows]
        average = sum(lengths) / len(rows)
        scores = [tf_score(row[2], average, n) for row, n in zip(rows, lengths, strict=True)]
        order = sorted(range(len(rows)), key=lambda n: (-scores[n], -rows[n][0]))
        return [rows[n] for n in order]

    def _rows(self, sql: str, match: str, limit: int) -> list[tuple[int, str, str]]:
        rows = self.conn.execute(sql, (MARK, END, match, limit))
        return [(int(rowid), str(kind), str(marked)) for rowid, kind, marked in rows]

    # -- state --------------------------------------------------------------------------------

    def _messages(self) -> int:
        return int(self._state("messages") or 0)

    def _state(self, key: str) -> str | None:
        row = self.conn.execute("SELECT value FROM state WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def _set_state(self, key: str, value: str) -> None:
        self.conn.execute("INSERT OR REPLACE INTO state (key, value) VALUES (?, ?)", (key, value))

    def _warn_once(self, warning: str) -> None:
        if warning not in self.warnings:
            self.warnings.append(warning)


_MARKED = "SELECT rowid, kind, highlight(hits, 0, ?, ?) FROM hits WHERE hits MATCH ? "
"""Each hit's text with its matches marked, for the snippet and the term frequency."""


def _node_rows(
    path: Path, offset: int, budget: int
) -> Iterator[tuple[int, int, list[tuple[int, str]]]]:
    """(the offset after a batch of lines, the lines read, their summaries as (rowid, text))
    from `offset` on, until about `budget` lines are read. Lines that hold no node are passed
    over, as the index's loader does."""
    lines = 0
    for batch in Scan(path, start=offset).batches():
        rows = []
        end = batch.offset
        taken = 0
        for raw in batch.lines:
            end += len(raw)
            taken += 1
            parsed = parse_object(raw[:-1])
            record = decode_node(parsed) if isinstance(parsed, dict) else None
            if record is not None and record.flag == BUILT:
                rows.append((node_rowid(record.l, record.i), record.text))
            if lines + taken >= budget:
                break
        lines += taken
        yield end, taken, rows
        if lines >= budget:
            return


def _fingerprint(store: ChatStore, i: int) -> str:
    return _fingerprint_of(store.read_message(i))


def _fingerprint_of(record: MessageRecord) -> str:
    data = f"{record.date}\0{record.kind}\0{record.text}".encode("utf-8", "surrogatepass")
    return hashlib.blake2b(data, digest_size=8).hexdigest()
