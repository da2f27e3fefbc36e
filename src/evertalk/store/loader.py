"""Opening the index: trust the checkpoint, scan only the log's tail, or rebuild from scratch.

Every scan works in memory first and is checked (ids contiguous from 0, none twice) before a byte
is written, so that a log that refuses to open leaves the folder exactly as it was.
"""

from __future__ import annotations

import sqlite3
from array import array
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from evertalk.store import keys, quarantine
from evertalk.store.days import list_day_files
from evertalk.store.errors import CorruptLog
from evertalk.store.index import Index, Level
from evertalk.store.index_files import (
    SIZE_CODE,
    IndexFiles,
    LevelData,
    StaleIndex,
    write_rebuild,
)
from evertalk.store.jsonl import TORN, Line, Scan
from evertalk.store.meta import (
    META_NAME,
    Meta,
    new_build,
    read_build,
    read_meta,
    seal,
    tails_changed,
)
from evertalk.store.pages import verdicts
from evertalk.store.records import claimed_id, decode_node
from evertalk.store.secure import make_dir
from evertalk.store.skipped import Skipped
from evertalk.store.tables import (
    ABSENT,
    LOC_WIDTH,
    Loc,
    MemTable,
    OverlayTable,
    Table,
    pack_loc,
)

INDEX_DIR = "index"
MAIN, TREE = "main", "tree"


def log_sizes(chat_dir: Path) -> dict[str, int]:
    """Every day file of the log and of the tree, by name relative to the chat folder."""
    sizes = {}
    for folder in (MAIN, TREE):
        for name in list_day_files(chat_dir / folder):
            sizes[f"{folder}/{name}"] = (chat_dir / folder / name).stat().st_size
    return sizes


@dataclass(slots=True)
class _Entry:
    """A message record as read, with where it lies."""

    i: int
    loc: bytes
    key: str | None
    where: str


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


@dataclass(slots=True)
class _Scanner:
    """Reads what the index lacks into `msg`, `levels` and `keys`, and checks the ids."""

    chat_dir: Path
    meta: Meta
    msg: Table
    levels: list[Level]
    keys: keys.KeyStore
    new_level: Callable[[], Level]
    sizes: dict[str, int]
    skipped: Skipped = field(default_factory=Skipped)
    bad: list[BadLine] = field(default_factory=list)
    beyond: list[Beyond] = field(default_factory=list)
    terms: dict[str, bytes] = field(default_factory=dict)
    changed: bool = False

    def _lines(self, name: str) -> Iterator[Line]:
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
        yield from scan
        state.scanned, state.lines = scan.end, scan.lines
        if scan.term:
            self.terms[name] = scan.term
        if scan.torn_lineno is not None:
            self.skipped.add(str(path), scan.torn_lineno, f"{TORN}; skipped")

    def _skip(self, name: str, line: Line, reason: str) -> None:
        self.skipped.add(str(self.chat_dir / name), line.lineno, f"{reason}; skipped")

    def _where(self, i: int) -> str:
        loc = Loc.unpack(self.msg.get(i))
        name = self.meta.file_names().get(loc.file_no) if loc is not None else None
        return str(self.chat_dir / name) if name is not None else "?"

    def messages(self) -> None:
        ids = _Ids(self, self.meta.messages)
        for name in sorted(n for n in self.sizes if n.startswith(MAIN + "/")):
            no, path = self.meta.entry(name).no, self.chat_dir / name
            for line, record, skip in verdicts(self._lines(name)):
                if skip is not None:
                    self._skip(name, line, skip)
                    if record is None:
                        self.bad.append(BadLine(name, line.lineno, line.offset, line.length, skip))
                    continue
                assert record is not None
                loc = pack_loc(no, line.offset, line.length)
                ids.take(_Entry(record.i, loc, record.key, f"{path} line {line.lineno}"))
        ids.check_complete()
        self.meta.messages = ids.expected

    def nodes(self) -> None:
        total = self.meta.messages
        for name in sorted(n for n in self.sizes if n.startswith(TREE + "/")):
            no = self.meta.entry(name).no
            for line in self._lines(name):
                if line.record is None:
                    self._skip(name, line, line.reason or "not a valid tree record")
                    continue
                node = decode_node(line.record)
                if node is None:
                    self._skip(name, line, "not a valid tree record")
                    continue
                if node.l > 62 or (node.i + 1) << node.l > total:
                    self.beyond.append(Beyond(name, line.offset, line.length))
                    continue
                while len(self.levels) <= node.l:
                    self.levels.append(self.new_level())
                level, loc = self.levels[node.l], pack_loc(no, line.offset, line.length)
                held = level.loc.get(node.i)
                # The same location is the same record, indexed after the checkpoint.
                if held != ABSENT and held != loc:
                    self._skip(name, line, "a second record of a node already built")
                    continue
                level.set(node.i, loc, node.size, node.flag)


@dataclass(slots=True)
class _Ids:
    """Checks that message ids run from 0 with no gap and none twice, in whatever order the
    files hold them (a clock that stepped back puts later ids in earlier-named files)."""

    scanner: _Scanner
    expected: int
    pending: dict[int, _Entry] = field(default_factory=dict)

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


def _new_mem_level() -> Level:
    return Level(MemTable(LOC_WIDTH), array(SIZE_CODE), bytearray())


def _new_overlay_level() -> Level:
    return Level(OverlayTable(MemTable(LOC_WIDTH), 0), array(SIZE_CODE), bytearray())


@dataclass(slots=True)
class _Base:
    meta: Meta
    files: IndexFiles
    levels: list[Level]
    keys: keys.KeyStore


def _mtime_ns(path: Path) -> int:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return 0


def _load_levels(files: IndexFiles, meta: Meta, checkpointed: int) -> list[Level]:
    """Each level's sizes and flags, checked when their files were written since meta.json.

    A checkpoint writes meta.json after the files, and a clean close checkpoints, so files
    written later were either left by a crash or changed by something else; only those are
    worth checking value by value, which costs milliseconds on a chat of a million messages.
    (Written in the same tick of the file system's clock counts as later: checking more is safe.)
    """
    levels = []
    for level, (level_files, count) in enumerate(zip(files.levels, meta.levels, strict=True)):
        check = level_files.written_ns() >= checkpointed
        sizes, flags = level_files.load(level, count, check=check)
        levels.append(Level(OverlayTable(level_files.loc, count), sizes, flags))
    return levels


def _load_base(index_dir: Path, sizes: dict[str, int], readonly: bool) -> _Base | str:
    """The checkpointed index, or the reason it cannot be used."""
    checkpointed = _mtime_ns(index_dir / META_NAME)  # before the read: a rewrite then checks more
    meta = read_meta(index_dir)
    if not isinstance(meta, Meta):
        return meta or "there is no index yet"
    for name, state in meta.files.items():
        if sizes.get(name, -1) < state.scanned:
            return f"{name} is missing or shorter than when it was indexed"
    if any(count > meta.messages >> level for level, count in enumerate(meta.levels)):
        return "meta.json counts nodes that cannot exist"
    changed = tails_changed(meta, index_dir.parent)
    if changed is not None:
        return f"{changed} changed before the point it was indexed up to"
    if not readonly and not (index_dir / keys.KEYS_NAME).is_file():
        return "keys.db is missing"
    try:
        files = IndexFiles.open(index_dir, meta, writable=not readonly)
    except StaleIndex as error:
        return str(error)
    except OSError as error:
        return f"cannot open it ({error.strerror})"
    try:
        levels = _load_levels(files, meta, checkpointed)
        conn = None if readonly else keys.connect(index_dir / keys.KEYS_NAME)
        key_store = keys.KeyStore(conn, meta.messages, track=not readonly)
    except StaleIndex as error:
        files.close()
        return str(error)
    except (OSError, sqlite3.Error) as error:
        files.close()
        return f"cannot read it ({error})"
    # A reader shares the files with their owner, whose rebuild would replace meta.json first.
    if readonly and read_build(index_dir) != meta.build:
        key_store.close()
        files.close()
        return "the index was rebuilt while it was read"
    return _Base(meta, files, levels, key_store)


def _scanner(chat_dir: Path, base: _Base | str, sizes: dict[str, int], readonly: bool) -> _Scanner:
    """A scanner of what the checkpoint lacks, or of everything when there is no checkpoint."""
    if isinstance(base, _Base):
        msg = OverlayTable(base.files.msg_table(), base.meta.messages)
        return _Scanner(
            chat_dir, base.meta.copy(), msg, base.levels, base.keys, _new_overlay_level, sizes
        )
    return _Scanner(
        chat_dir,
        Meta(new_build()),
        MemTable(LOC_WIDTH),
        [],
        keys.KeyStore(None, 0, track=not readonly),
        _new_mem_level,
        sizes,
    )


def open_index(
    chat_dir: Path, *, readonly: bool, warnings: list[str], rebuild: str | None = None
) -> tuple[Index, dict[str, bytes]]:
    """The chat's index, brought up to date with the log, and the torn-line terminators.

    A read-only open keeps what it scanned in memory; otherwise it is written, once checked.
    `rebuild` gives a reason to build it from the whole log, whatever the checkpoint says.
    """
    sizes = log_sizes(chat_dir)
    base = rebuild or _load_base(chat_dir / INDEX_DIR, sizes, readonly)
    if isinstance(base, _Base):
        tail_warnings: list[str] = []
        try:
            opened = _open_index(chat_dir, base, sizes, readonly, tail_warnings)
        except (StaleIndex, CorruptLog) as error:
            # The log does not go on from where the checkpoint left it: scan all of it, which
            # either rebuilds the index or finds the log itself at fault (the same error then).
            base = f"the log does not fit it ({error})"
        else:
            warnings += tail_warnings
            return opened
    if sizes and not base.startswith(_QUIET):
        warnings.append(f"rebuilding the index of {chat_dir}: {base}")
    return _open_index(chat_dir, base, sizes, readonly, warnings)


_QUIET = "records were set aside"  # a rebuild that the set-aside warning already explains


def _open_index(
    chat_dir: Path, base: _Base | str, sizes: dict[str, int], readonly: bool, warnings: list[str]
) -> tuple[Index, dict[str, bytes]]:
    try:
        scanner = _scanner(chat_dir, base, sizes, readonly)
        scanner.messages()
        scanner.nodes()
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
            files = base.files if isinstance(base, _Base) else None
            index = Index(chat_dir, scanner.meta, scanner.msg, scanner.levels, scanner.keys, files)
        elif isinstance(base, _Base):
            index = _commit_tail(chat_dir, base.meta, scanner, base.files)
            if scanner.changed:
                index.checkpoint()
        else:
            index = _commit_rebuild(chat_dir, scanner)
    except BaseException:
        if isinstance(base, _Base):
            base.keys.close()
            base.files.close()
        raise
    if index is None:  # the tree files changed: index them anew
        if isinstance(base, _Base):
            base.keys.close()
            base.files.close()
        return open_index(chat_dir, readonly=False, warnings=warnings, rebuild=_QUIET)
    return index, scanner.terms


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
