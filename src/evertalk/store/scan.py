"""Scanning the log into the index: the lines past the checkpoint (a tail), or all of them (a
rebuild), and writing what was found.

Every scan works in memory first and is checked (ids contiguous from 0, none twice) before a byte
is written, so that a log that refuses to open leaves the folder exactly as it was. An open
loads this module only when it has lines to scan, or must write: a read-only open of an index
that covers the whole log needs none of it (see loader.py).
"""

from __future__ import annotations

import os
import re
import sqlite3
from array import array
from bisect import bisect_left
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import accumulate, compress, islice, repeat
from operator import attrgetter, is_not
from pathlib import Path
from typing import TYPE_CHECKING, cast

from evertalk.memory.text import LINE_LIMIT
from evertalk.memory.tree import BUILT, CUT, FREE
from evertalk.store import keys, quarantine
from evertalk.store.checkpoint import (
    INDEX_DIR,
    MAIN,
    REBUILDING,
    TREE,
    Checkpoint,
    behind,
    caught_up,
    load_checkpoint,
    log_sizes,
)
from evertalk.store.errors import ChatLocked, CorruptLog
from evertalk.store.index import Index, Level
from evertalk.store.index_files import (
    MSG_LOC,
    SIZE_CODE,
    IndexFiles,
    StaleIndex,
    level_names,
)
from evertalk.store.jsonl import TORN, Batch, Scan
from evertalk.store.lock import ChatLock
from evertalk.store.meta import META_NAME, Meta, new_build, seal, write_meta
from evertalk.store.pages import LOST_PAGE, PageGroup
from evertalk.store.records import (
    NODE_LEVELS,
    MessageRecord,
    claimed_id,
    read_message_line,
    read_node_line,
)
from evertalk.store.secure import fsync_dir, make_dir, write_synced
from evertalk.store.skipped import Skipped
from evertalk.store.tables import (
    ABSENT,
    LOC_WIDTH,
    WORD_CODE,
    Loc,
    MemTable,
    OverlayTable,
    Table,
    join_words,
    pack_loc,
    pack_locs,
)

if TYPE_CHECKING:
    from evertalk.store.fast_lines import MessageLine

_ID, _KEY = attrgetter("i"), attrgetter("key")


@dataclass(slots=True)
class _Entry:
    """A message record as read, with where it lies."""

    i: int
    loc: bytes
    key: str | None
    path: Path
    lineno: int

    @property
    def where(self) -> str:
        # Built only for an error message: a label per line costs a rebuild seconds.
        return f"{self.path} line {self.lineno}"


@dataclass(frozen=True, slots=True)
class BadLine:
    """A line of the log that is not a message record."""

    name: str
    """The file, relative to the chat folder."""
    lineno: int
    offset: int
    length: int
    reason: str


@dataclass(frozen=True, slots=True)
class Beyond:
    """A tree record for a node past the log's end: written for messages since lost."""

    name: str
    offset: int
    length: int


def _line_lengths(batch: Batch) -> list[int]:
    """The length of each line of `batch`, its newline included."""
    return list(map(len, batch.lines))


def _line_offsets(batch: Batch, lengths: list[int]) -> list[int]:
    """Where each line of `batch` starts, given `_line_lengths(batch)`."""
    return list(islice(accumulate(lengths, initial=batch.offset), len(lengths)))


def level_counts(messages: int) -> list[int]:
    """The nodes that each tree level 0 … NODE_LEVELS can have: node (l, i) exists once
    (i + 1) << l ≤ T. Level NODE_LEVELS stands for every level past the last (none of their
    nodes can exist: T stays under 1 << NODE_LEVELS)."""
    return [messages >> level for level in range(NODE_LEVELS)] + [0]


@dataclass(slots=True)
class _Run:
    """Lines of one message file read but not yet handed to `_Ids`: they wait there while the
    pages of a long message may still turn out to be lost. Columns, one item per line, so that
    a run of plain lines is handed over with no Python step per line."""

    no: int
    path: Path
    lineno: int = 0
    """The number of the run's first line."""
    offsets: list[int] = field(default_factory=list)
    lengths: list[int] = field(default_factory=list)
    """Each line's length, its newline included."""
    ids: list[int | None] = field(default_factory=list)
    """The id of each line that counts; None for one that does not, or not yet (a page)."""
    keys: dict[int, str] = field(default_factory=dict)
    """Idempotency keys, by position in the run."""

    def add(self, batch: Batch) -> None:
        """Take a batch's places; its ids come with `take`."""
        if not self.ids:
            self.lineno = batch.lineno
        lengths = _line_lengths(batch)
        self.offsets += _line_offsets(batch, lengths)
        self.lengths += lengths

    def take(self, records: list[MessageLine]) -> None:
        """The next lines are these whole messages."""
        at = len(self.ids)
        self.ids += map(_ID, records)
        keys = list(map(_KEY, records))
        if keys.count(None) < len(keys):
            self.keys.update((at + k, key) for k, key in enumerate(keys) if key is not None)

    def flush(self, ids: _Ids) -> None:
        """Hand the lines that count to `ids`, in file order, and start a new run."""
        positions: Sequence[int] = range(len(self.ids))
        counted = cast(list[int], self.ids)
        offsets: Iterable[int] = self.offsets
        lengths: Iterable[int] = self.lengths
        if None in self.ids:
            positions = list(compress(positions, map(is_not, self.ids, repeat(None))))
            counted = cast(list[int], list(map(self.ids.__getitem__, positions)))
            offsets = map(self.offsets.__getitem__, positions)
            lengths = map(self.lengths.__getitem__, positions)
        if ids.follows(counted):
            keyed = [(key, self.ids[at]) for at, key in self.keys.items()]
            ids.put_run(pack_locs(self.no, offsets, lengths), counted, keyed)
        else:
            for at in positions:
                ids.take(self._entry(at))
        self.offsets, self.lengths, self.ids, self.keys = [], [], [], {}

    def _entry(self, at: int) -> _Entry:
        i = self.ids[at]
        assert i is not None
        loc = pack_loc(self.no, self.offsets[at], self.lengths[at])
        return _Entry(i, loc, self.keys.get(at), self.path, self.lineno + at)


class _NewTree:
    """The tree's levels in a rebuild, in flat columns made at once and filled in place by
    `_Scanner._node_file`: node (level, i) is item `bases[level] + i` of each, found with one
    addition (a row per level costs the loop a lookup and an unpacking per node; arrays grown a
    node at a time, or a call per node, would cost more than the parse).

    `flags` is a list, not a bytearray: CPython reads and writes a list's items in its loop
    without a call, and its values (0 to 3) are shared ints, so it costs only its pointers.
    A node placed has a flag of 1 to 3, so a flag of 0 is a node not found yet. `spans` holds
    each location's second word, as `pack_locs` packs it: the line's length + (file no << 32).
    """

    def __init__(self, total: int) -> None:
        self.bases = list(accumulate(level_counts(total), initial=0))
        nodes = self.bases[-1]
        self.flags = [0] * nodes
        self.sizes = array(SIZE_CODE, [0]) * nodes
        self.starts = array(WORD_CODE, [0]) * nodes
        self.spans = array(WORD_CODE, [0]) * nodes

    def levels(self) -> list[Level]:
        """The levels up to the last with a built node, each cut after its last built node, as
        node by node growth leaves them. The columns are emptied from the top level down as the
        levels take their items: they are the rebuild's largest objects."""
        levels: list[Level] = []
        for start in reversed(self.bases[:-1]):
            flags = bytearray(self.flags[start:])
            count = len(flags.rstrip(b"\0"))
            del flags[count:]
            with memoryview(self.starts) as starts, memoryview(self.spans) as spans:
                loc = join_words(starts[start : start + count], spans[start : start + count])
            del self.flags[start:], self.starts[start:], self.spans[start:]
            if start:
                sizes = self.sizes[start : start + count]
                del self.sizes[start:]
            else:  # the largest level takes the column itself
                sizes, self.sizes = self.sizes, array(SIZE_CODE)
                del sizes[count:]
            if count or levels:
                levels.append(Level(MemTable.adopt(LOC_WIDTH, loc), sizes, flags))
        levels.reverse()
        return levels


class _TailTree:
    """The tree's levels in a tail scan: the checkpoint's, with what the tail adds over them."""

    def __init__(self, levels: list[Level]) -> None:
        self._levels = levels

    def place(self, level: int, i: int, where: tuple[int, int, int], size: int, flag: int) -> bool:
        """Node (level, i) is at `where` (file no, offset, length); False when another record of
        it was found first. The caller has checked that the node exists."""
        while len(self._levels) <= level:
            self._levels.append(_new_overlay_level())
        row, loc = self._levels[level], pack_loc(*where)
        held = row.loc.get(i)
        # The same location is the same record, indexed after the checkpoint.
        if held != ABSENT and held != loc:
            return False
        row.set(i, loc, size, flag)
        return True

    def levels(self) -> list[Level]:
        return self._levels


@dataclass(slots=True)
class _Scanner:
    """Reads what the index lacks into `msg`, `tree` and `keys`, and checks the ids.

    Lines are decoded by the fast decoders of records.py; a line they refuse goes to the
    definition (`read_message_line`, `read_node_line`), which decides as it always has.
    """

    chat_dir: Path
    meta: Meta
    msg: Table
    tree: _NewTree | _TailTree | None
    """None until `messages` has counted them, for a rebuild."""
    keys: keys.KeyStore
    sizes: dict[str, int]
    skipped: Skipped = field(default_factory=Skipped)
    bad: list[BadLine] = field(default_factory=list)
    beyond: list[Beyond] = field(default_factory=list)
    terms: dict[str, bytes] = field(default_factory=dict)
    changed: bool = False
    levels: list[Level] = field(default_factory=list)
    """The tree's levels, once `nodes` has read them."""

    def _batches(self, name: str) -> Iterator[Batch]:
        """The new complete lines of `name`."""
        state = self.meta.entry(name)
        if self.sizes[name] == state.scanned:
            return
        self.changed = True
        path = self.chat_dir / name
        if state.scanned and not _ends_line(path, state.scanned):
            # Bytes were put in or taken out before the indexed end: every location after
            # them is off, and the tail would be read from the middle of a line.
            raise StaleIndex(f"{name} changed before the point it was indexed up to")
        scan = Scan(path, state.scanned, state.lines + 1)
        yield from scan.batches()
        state.scanned, state.lines = scan.end, scan.lines
        if scan.term:
            self.terms[name] = scan.term
        if scan.torn_lineno is not None:
            self.skipped.add(str(path), scan.torn_lineno, f"{TORN}; skipped")

    def _where(self, i: int) -> str:
        loc = Loc.unpack(self.msg.get(i))
        name = self.meta.file_names().get(loc.file_no) if loc is not None else None
        return str(self.chat_dir / name) if name is not None else "?"

    # Messages

    def messages(self) -> None:
        ids = _Ids(self, self.meta.messages)
        for name in sorted(n for n in self.sizes if n.startswith(MAIN + "/")):
            self._message_file(name, ids)
        ids.check_complete()
        self.meta.messages = ids.expected
        if self.tree is None:
            self.tree = _NewTree(ids.expected)

    def _message_file(self, name: str, ids: _Ids) -> None:
        run = _Run(self.meta.entry(name).no, self.chat_dir / name)
        group: PageGroup[tuple[int, int]] = PageGroup()  # (position in the run, id) of each page
        pending = False  # whether `group` holds pages
        for batch in self._batches(name):
            # loaded by the first line read: the open of a whole index (a status) reads none
            from evertalk.store.fast_lines import REFUSED, decode_message_line

            run.add(batch)
            try:
                # A batch of plain messages, the rule, is taken whole: a loop over its lines
                # in Python took a sixth longer.
                records = list(map(decode_message_line, batch.lines))
            except REFUSED:  # damage, a page, a key it does not know: line by line
                pending = self._message_lines(name, run, group, pending, batch.lines)
            else:
                if pending:
                    self._lose(run, group.lose())
                    pending = False
                run.take(records)
            if not pending:
                run.flush(ids)
        # After the torn last line's warning, as pages were always warned about.
        self._lose(run, group.lose())
        run.flush(ids)

    def _message_lines(
        self,
        name: str,
        run: _Run,
        group: PageGroup[tuple[int, int]],
        pending: bool,
        lines: list[bytes],
    ) -> bool:
        """A batch that holds lines the fast decoder refuses, read line by line; whether
        `group` holds pages of a long message not yet complete."""
        from evertalk.store.fast_lines import REFUSED, decode_message_line

        for raw in lines:
            try:
                record = decode_message_line(raw)
            except REFUSED:
                pending = self._odd_message(name, run, group, raw)
                continue
            if pending:
                self._lose(run, group.lose())
                pending = False
            run.take([record])
        return pending

    def _odd_message(
        self, name: str, run: _Run, group: PageGroup[tuple[int, int]], raw: bytes
    ) -> bool:
        """A line the fast decoder refused, as the definition reads it; whether `group` now
        holds pages of a long message not yet complete."""
        at = len(run.ids)
        record = read_message_line(raw)
        page = record.page if isinstance(record, MessageRecord) else None
        if page is None:
            self._lose(run, group.lose())
        if isinstance(record, str):
            run.ids.append(None)
            lineno = run.lineno + at
            self.skipped.add(str(run.path), lineno, f"{record}; skipped")
            self.bad.append(BadLine(name, lineno, run.offsets[at], run.lengths[at], record))
            return False
        if record.key is not None:
            run.keys[at] = record.key
        if page is None:
            run.ids.append(record.i)
            return False
        run.ids.append(None)  # a page counts once its group is complete
        lost, complete = group.add((at, record.i), record.i, page)
        self._lose(run, lost)
        for page_at, i in complete:
            run.ids[page_at] = i
        return bool(group)

    def _lose(self, run: _Run, pages: list[tuple[int, int]]) -> None:
        for at, _ in pages:
            run.keys.pop(at, None)
            self.skipped.add(str(run.path), run.lineno + at, f"{LOST_PAGE}; skipped")

    # Nodes

    def nodes(self) -> None:
        for name in sorted(n for n in self.sizes if n.startswith(TREE + "/")):
            self._node_file(name)
        assert self.tree is not None
        self.levels = self.tree.levels()

    def _node_file(self, name: str) -> None:
        no, path, tree = self.meta.entry(name).no, str(self.chat_dir / name), self.tree
        limit, counts = LINE_LIMIT, level_counts(self.meta.messages)
        tail = tree if isinstance(tree, _TailTree) else None
        new = tree if isinstance(tree, _NewTree) else _NewTree(0)  # a tail scan: `tail.place`
        bases, flags, sizes, starts, spans = new.bases, new.flags, new.sizes, new.starts, new.spans
        word = no << 32  # + a line's length: the second word of its location
        for batch in self._batches(name):
            from evertalk.store.fast_lines import REFUSED  # as in _message_file
            from evertalk.store.fast_lines import decode_node_line as decode

            end = batch.offset
            # The hot loop of a rebuild, written out: a call per node costs a tenth of it.
            for raw in batch.lines:
                offset = end
                end += len(raw)
                try:
                    node = decode(raw)
                except REFUSED:  # damage, a key it does not know, a level past NODE_LEVELS
                    found = read_node_line(raw)
                    if isinstance(found, str):
                        self._skip_node(path, batch, offset, found)
                        continue
                    i, size, flag = found.i, found.size, found.flag
                    level = min(found.l, NODE_LEVELS)  # past the last: beyond the log, below
                else:
                    # What decode_node checks beyond the types, which the decoder checked
                    text, free = node.text, node.free
                    size = len(text) if text.isascii() else len(text.encode("utf-8"))
                    flag = FREE if free else BUILT
                    if node.cut:
                        flag = 0 if free else CUT  # 0: both, which no node is
                    if size > limit or not flag:
                        self._skip_node(path, batch, offset, "not a valid tree record")
                        continue
                    level, i = node.l, node.i
                if i >= counts[level]:
                    self.beyond.append(Beyond(name, offset, end - offset))
                    continue
                if tail is not None:
                    placed = tail.place(level, i, (no, offset, end - offset), size, flag)
                else:
                    at = bases[level] + i
                    placed = not flags[at]
                    if placed:
                        flags[at] = flag
                        sizes[at] = size
                        starts[at] = offset
                        spans[at] = end - offset + word
                if not placed:
                    self._skip_node(path, batch, offset, "a second record of a node already built")

    def _skip_node(self, path: str, batch: Batch, offset: int, reason: str) -> None:
        offsets = _line_offsets(batch, _line_lengths(batch))  # found only now: skips are rare
        self.skipped.add(path, batch.lineno + bisect_left(offsets, offset), f"{reason}; skipped")


@dataclass(slots=True)
class _Ids:
    """Checks that message ids run from 0 with no gap and none twice, in whatever order the
    files hold them (a clock that stepped back puts later ids in earlier-named files)."""

    scanner: _Scanner
    expected: int
    pending: dict[int, _Entry] = field(default_factory=dict)

    def follows(self, ids: list[int]) -> bool:
        """Whether `ids` are exactly the next ones, in order: then `put_run` takes them."""
        return not self.pending and ids == list(range(self.expected, self.expected + len(ids)))

    def put_run(self, locs: bytes, ids: list[int], keyed: list[tuple[str, int | None]]) -> None:
        """The next messages, `ids`, at `locs` (packed), with their keys (key, id)."""
        self.scanner.msg.put_run(self.expected, locs)
        for key, i in keyed:
            if i is not None:
                self.scanner.keys.stage(key, i)
        self.expected += len(ids)

    def take(self, entry: _Entry) -> None:
        i, pending = entry.i, self.pending
        if i < self.expected or i in pending:
            first = pending[i].where if i in pending else self.scanner._where(i)
            raise CorruptLog(f"{entry.where}: message id {i} is a duplicate (first: {first})")
        if i > self.expected:
            pending[i] = entry
            return
        self._put(entry)
        while self.expected in pending:
            self._put(pending.pop(self.expected))

    def _put(self, entry: _Entry) -> None:
        self.scanner.msg.put(entry.i, entry.loc)
        if entry.key is not None:
            self.scanner.keys.stage(entry.key, entry.i)
        self.expected += 1

    def check_complete(self) -> None:
        if self.pending:
            after = self.pending[min(self.pending)]
            raise CorruptLog(gap_error(self.scanner, self.expected, after))


def gap_error(scanner: _Scanner, missing: int, after: _Entry) -> str:
    """Why message `missing` is not there, naming the line at fault when one can be found."""
    fix = "`evertalk memory repair` puts a note in place of each message it cannot read"
    bad = _culprit(scanner, missing)
    if bad is not None:
        return (
            f"{scanner.chat_dir / bad.name} line {bad.lineno}: {bad.reason}, so message "
            f"{missing} cannot be read and the chat cannot open; {fix}"
        )
    return (
        f"message {missing} is missing from the log ({after.where} holds message {after.i}; "
        f"was a day file deleted or cut short?), so the chat cannot open; {fix}"
    )


def _culprit(scanner: _Scanner, missing: int) -> BadLine | None:
    """The damaged line that most likely held message `missing`: one whose bytes still begin
    with that id, else the first damaged line found."""
    for bad in scanner.bad:
        if claimed_id(_raw(scanner.chat_dir / bad.name, bad.offset, bad.length)) == missing:
            return bad
    return scanner.bad[0] if scanner.bad else None


def _raw(path: Path, offset: int, length: int) -> bytes:
    with open(path, "rb", buffering=0) as file:
        file.seek(offset)
        return file.read(length)


def _ends_line(path: Path, offset: int) -> bool:
    """Whether the byte before `offset` in the file is a newline."""
    with open(path, "rb", buffering=0) as file:
        file.seek(offset - 1)
        return file.read(1) == b"\n"


def _new_overlay_level() -> Level:
    return Level(OverlayTable(MemTable(LOC_WIDTH), 0), array(SIZE_CODE), bytearray())


def _scanner(
    chat_dir: Path, base: Checkpoint | str, sizes: dict[str, int], readonly: bool
) -> _Scanner:
    """A scanner of what the checkpoint lacks, or of everything when there is no checkpoint."""
    if isinstance(base, Checkpoint):
        msg = OverlayTable(base.files.msg_table(), base.meta.messages)
        tree = _TailTree(base.levels)
        return _Scanner(chat_dir, base.meta.copy(), msg, tree, base.keys, sizes)
    key_store = keys.KeyStore(None, 0, track=not readonly)
    return _Scanner(chat_dir, Meta(new_build()), MemTable(LOC_WIDTH), None, key_store, sizes)


def open_scanning(
    chat_dir: Path, *, readonly: bool, warnings: list[str], rebuild: str | None
) -> tuple[Index, dict[str, bytes]]:
    """`loader.open_index` for an owner, or for a reader given a reason to rebuild."""
    if not readonly:
        return _open(chat_dir, readonly=False, warnings=warnings, rebuild=rebuild)
    sizes = log_sizes(chat_dir)
    base = rebuild or load_checkpoint(chat_dir / INDEX_DIR, sizes, readonly=True)
    return _open_loaded(chat_dir, base, sizes, readonly=True, warnings=warnings)


def open_behind(
    chat_dir: Path, base: Checkpoint | str, warnings: list[str]
) -> tuple[Index, dict[str, bytes]]:
    """`loader.open_index` for a reader whose checkpoint (`base`, loaded read-only, or why it
    cannot be used) leaves lines of the log to scan."""
    if isinstance(base, Checkpoint):
        base.close()  # the owner's open below loads it again, writable
    opened = _open_as_owner(chat_dir, warnings)
    if opened is not None:
        return opened
    return _open(chat_dir, readonly=True, warnings=warnings, rebuild=None)


def _open_as_owner(chat_dir: Path, warnings: list[str]) -> tuple[Index, dict[str, bytes]] | None:
    """For a reader: scan under the chat's lock as the owner would, saving the index when the
    scan is clean; None, having written nothing but maybe the index, when the lock is taken or
    the index cannot be written."""
    index_dir = chat_dir / INDEX_DIR
    for folder in (chat_dir, index_dir):
        if folder.exists() and not os.access(folder, os.W_OK | os.X_OK):
            return None  # a chat this user may read but not write
    try:
        lock = ChatLock.acquire(chat_dir)
    except (ChatLocked, OSError):
        return None
    try:
        found: list[str] = []
        try:
            index, terms = _open(
                chat_dir, readonly=False, warnings=found, rebuild=None, owner=False
            )
            if not index.writable:  # the scan found damage: kept in memory
                warnings += found
                return index, terms
            index.close()
        except (OSError, sqlite3.Error):
            return None
        warnings += found
        # What was saved, opened as any reader opens it: the lock kept an owner from starting
        # meanwhile, so nothing is left to scan.
        return _open(chat_dir, readonly=True, warnings=warnings, rebuild=None)
    finally:
        lock.release()


def _open(
    chat_dir: Path, *, readonly: bool, warnings: list[str], rebuild: str | None, owner: bool = True
) -> tuple[Index, dict[str, bytes]]:
    """Open the index as it is on disk, or rebuild it. `owner=False`: a reader that holds the
    lock for the moment, which saves only a clean scan (see `_open_index`)."""
    sizes = log_sizes(chat_dir)
    base = rebuild or load_checkpoint(chat_dir / INDEX_DIR, sizes, readonly)
    return _open_loaded(chat_dir, base, sizes, readonly=readonly, warnings=warnings, owner=owner)


def _open_loaded(
    chat_dir: Path,
    base: Checkpoint | str,
    sizes: dict[str, int],
    *,
    readonly: bool,
    warnings: list[str],
    owner: bool = True,
) -> tuple[Index, dict[str, bytes]]:
    if readonly and isinstance(base, Checkpoint) and not behind(base.meta, sizes):
        return caught_up(chat_dir, base, sizes), {}  # what a scan of no lines would give
    if isinstance(base, Checkpoint):
        tail_warnings: list[str] = []
        try:
            opened = _open_index(chat_dir, base, sizes, readonly, tail_warnings, owner)
        except (StaleIndex, CorruptLog) as error:
            # The log does not go on from where the checkpoint left it: scan all of it, which
            # either rebuilds the index or finds the log itself at fault (the same error then).
            base = f"the log does not fit it ({error})"
        else:
            warnings += tail_warnings
            return opened
    if sizes and not base.startswith(_QUIET):
        warnings.append(f"{REBUILDING} {chat_dir}: {base}")
    return _open_index(chat_dir, base, sizes, readonly, warnings, owner)


_QUIET = "records were set aside"  # a rebuild that the set-aside warning already explains


def _open_index(
    chat_dir: Path,
    base: Checkpoint | str,
    sizes: dict[str, int],
    readonly: bool,
    warnings: list[str],
    owner: bool,
) -> tuple[Index, dict[str, bytes]]:
    try:
        scanner = _scanner(chat_dir, base, sizes, readonly)
        scanner.messages()
        scanner.nodes()
        if not owner and (scanner.beyond or scanner.skipped.groups):
            # A reader saves only a scan of a log with nothing wrong in it: damage is left for
            # the owner's next open to report and index (and records to set aside, to move),
            # as before. What it scanned serves it in memory.
            readonly = True
            if isinstance(base, Checkpoint):
                base.files.read_only()
        warnings += scanner.skipped.warnings()
        if scanner.beyond and not readonly:
            warnings.append(_set_aside(chat_dir, scanner))
        elif scanner.beyond:
            warnings.append(
                f"{len(scanner.beyond)} tree records of {chat_dir} name messages past the end "
                "of the log; skipped (the next open by evertalk sets them aside)"
            )
        if scanner.beyond and not readonly:
            index = None
        elif readonly:
            files = base.files if isinstance(base, Checkpoint) else None
            index = Index(chat_dir, scanner.meta, scanner.msg, scanner.levels, scanner.keys, files)
        elif isinstance(base, Checkpoint):
            known = {name: state.lines for name, state in base.meta.files.items()}
            index = _commit_tail(chat_dir, base.meta, scanner, base.files)
            if scanner.changed:
                _checkpoint_tail(index, scanner, known)
        else:
            index = _commit_rebuild(chat_dir, scanner)
    except BaseException:
        if isinstance(base, Checkpoint):
            base.close()
        raise
    if index is None:  # the tree files changed: index them anew
        if isinstance(base, Checkpoint):
            base.close()
        return _open(chat_dir, readonly=False, warnings=warnings, rebuild=_QUIET)
    return index, scanner.terms


def _checkpoint_tail(index: Index, scanner: _Scanner, known: dict[str, int]) -> None:
    """Checkpoint what the tail scan added when it is worth it (`Index.checkpoint_worth_closing`):
    a few records of the last short run are left for the close, or the next open, to count."""
    lines = sum(state.lines - known.get(name, 0) for name, state in scanner.meta.files.items())
    new_files = not known.keys() >= scanner.meta.files.keys()
    index.scanned_tail(lines, must=new_files or bool(scanner.skipped.groups))
    if index.checkpoint_worth_closing:
        index.checkpoint()


def _set_aside(chat_dir: Path, scanner: _Scanner) -> str:
    """Move tree records past the log's end out of the tree, so that no later message is taken
    for the one they summarized; the warning that says where they went."""
    moved = quarantine.set_aside(
        chat_dir, [(chat_dir / r.name, r.offset, r.length) for r in scanner.beyond]
    )
    return (
        f"{len(scanner.beyond)} tree records summarized messages past the end of the log "
        f"(which has {scanner.meta.messages}: its end was lost); moved to {moved}"
    )


def _commit_tail(chat_dir: Path, checkpoint: Meta, scanner: _Scanner, files: IndexFiles) -> Index:
    """Write what the tail scan found, over files cut back to the checkpoint."""
    files.truncate(checkpoint)
    msg = files.msg_table()
    assert isinstance(scanner.msg, OverlayTable)
    for k, record in scanner.msg.changes.items():
        msg.put(k, record)
    for number, level in enumerate(scanner.levels):
        level_files = files.level(number)
        assert isinstance(level.loc, OverlayTable)
        for k, record in level.loc.changes.items():
            level_files.write(k, record, level.sizes[k], level.flags[k])
        level.loc, level.files = level_files.loc, level_files
    scanner.keys.flush()
    return Index(chat_dir, scanner.meta, msg, scanner.levels, scanner.keys, files)


def _commit_rebuild(chat_dir: Path, scanner: _Scanner) -> Index:
    """Write a whole new index from what the full scan found."""
    index_dir = chat_dir / INDEX_DIR
    make_dir(index_dir)
    meta = scanner.meta
    meta.levels = [len(level.flags) for level in scanner.levels]
    data = []
    for level in scanner.levels:
        assert isinstance(level.loc, MemTable)
        data.append(LevelData(level.loc.data, level.sizes, level.flags))
    assert isinstance(scanner.msg, MemTable)
    seal(meta, chat_dir)
    write_rebuild(index_dir, meta, scanner.msg.data, data, scanner.keys.staged)
    files = IndexFiles.open(index_dir, meta, writable=True)
    for level, level_files in zip(scanner.levels, files.levels, strict=True):
        level.loc, level.files = level_files.loc, level_files
    conn = keys.connect(index_dir / keys.KEYS_NAME)
    key_store = keys.KeyStore(conn, 1 << 62)
    return Index(chat_dir, meta, files.msg_table(), scanner.levels, key_store, files)


@dataclass(slots=True)
class LevelData:
    loc: bytes | bytearray
    sizes: array[int]
    flags: bytearray


_LEVEL_FILE = re.compile(r"tree-(\d+)\.(loc|size|flag)")


def write_rebuild(
    index_dir: Path,
    meta: Meta,
    msg: bytes | bytearray,
    levels: list[LevelData],
    key_rows: dict[str, int],
) -> None:
    """Replace the whole index with a new build."""
    # Without meta.json first, a crash midway cannot pair the old checkpoint with new files.
    (index_dir / META_NAME).unlink(missing_ok=True)
    fsync_dir(index_dir)
    _replace(index_dir / MSG_LOC, msg)
    for level, data in enumerate(levels):
        contents = (data.loc, data.sizes.tobytes(), data.flags)
        for name, content in zip(level_names(level), contents, strict=True):
            _replace(index_dir / name, content)
    for entry in index_dir.iterdir():
        match = _LEVEL_FILE.fullmatch(entry.name)
        if match and int(match.group(1)) >= len(levels):
            entry.unlink()
    tmp = index_dir / (keys.KEYS_NAME + ".tmp")
    conn = keys.create(tmp)
    try:
        conn.executemany("INSERT INTO keys (key, i) VALUES (?, ?)", key_rows.items())
        conn.commit()
    finally:
        conn.close()
    # A journal left by a crash belongs to the old database and would be replayed into the new.
    (index_dir / (keys.KEYS_NAME + "-journal")).unlink(missing_ok=True)
    os.replace(tmp, index_dir / keys.KEYS_NAME)
    write_meta(index_dir, meta)


def _replace(path: Path, data: bytes | bytearray) -> None:
    """Write a new file under a temporary name and rename it in, so that a reader that opened
    the old file keeps a consistent view of it."""
    tmp = path.with_name(path.name + ".tmp")
    write_synced(tmp, data, os.O_TRUNC)
    os.replace(tmp, path)
