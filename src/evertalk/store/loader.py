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

from evertalk.store import keys
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
from evertalk.store.jsonl import Line, Scan
from evertalk.store.meta import META_NAME, Meta, new_build, read_build, read_meta
from evertalk.store.records import decode_message, decode_node
from evertalk.store.secure import make_dir
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
class _Pending:
    loc: bytes
    key: str | None
    where: str


@dataclass(slots=True)
class _Scanner:
    """Reads what the index lacks into `msg`, `levels` and `keys`, and checks the ids."""

    chat_dir: Path
    meta: Meta
    msg: Table
    levels: list[Level]
    keys: keys.KeyStore
    new_level: Callable[[], Level]
    warnings: list[str]
    sizes: dict[str, int]
    terms: dict[str, bytes] = field(default_factory=dict)
    changed: bool = False

    def _lines(self, name: str) -> Iterator[tuple[Line, int, str]]:
        """The new complete lines of `name`, with its number and a `file line N` label."""
        state = self.meta.entry(name)
        if self.sizes[name] == state.scanned:
            return
        self.changed = True
        path = self.chat_dir / name
        if state.scanned and not _ends_line(path, state.scanned):
            # Bytes were put in or taken out before the indexed end: every location after
            # them is off, and the tail would be read from the middle of a line.
            raise StaleIndex(f"{name} changed before the point it was indexed up to")
        scan = Scan(path, state.scanned, state.lines + 1, self.warnings)
        for line in scan:
            yield line, state.no, f"{path} line {line.lineno}"
        state.scanned, state.lines = scan.end, scan.lines
        if scan.term:
            self.terms[name] = scan.term

    def _where(self, i: int) -> str:
        loc = Loc.unpack(self.msg.get(i))
        name = self.meta.file_names().get(loc.file_no) if loc is not None else None
        return str(self.chat_dir / name) if name is not None else "?"

    def _put(self, i: int, loc: bytes, key: str | None) -> None:
        self.msg.put(i, loc)
        if key is not None:
            self.keys.stage(key, i)

    def messages(self) -> None:
        expected = self.meta.messages
        pending: dict[int, _Pending] = {}  # ids read before an earlier id: a clock stepped back
        for name in sorted(n for n in self.sizes if n.startswith(MAIN + "/")):
            for line, no, where in self._lines(name):
                if line.record is None:
                    continue
                record = decode_message(line.record)
                if record is None:
                    self.warnings.append(f"{where}: not a valid message record; skipped")
                    continue
                i, loc = record.i, pack_loc(no, line.offset, line.length)
                if i < expected or i in pending:
                    first = pending[i].where if i in pending else self._where(i)
                    raise CorruptLog(f"{where}: message id {i} is a duplicate (first: {first})")
                if i > expected:
                    pending[i] = _Pending(loc, record.key, where)
                    continue
                self._put(i, loc, record.key)
                expected += 1
                while expected in pending:
                    found = pending.pop(expected)
                    self._put(expected, found.loc, found.key)
                    expected += 1
        if pending:
            after = pending[min(pending)]
            raise CorruptLog(
                f"{after.where}: message id {min(pending)} follows a gap: "
                f"message {expected} is missing"
            )
        self.meta.messages = expected

    def nodes(self) -> None:
        total = self.meta.messages
        for name in sorted(n for n in self.sizes if n.startswith(TREE + "/")):
            for line, no, where in self._lines(name):
                if line.record is None:
                    continue
                node = decode_node(line.record)
                if node is None:
                    self.warnings.append(f"{where}: not a valid tree record; skipped")
                    continue
                label = f"node ({node.l}, {node.i})"
                if node.l > 62 or (node.i + 1) << node.l > total:
                    self.warnings.append(f"{where}: {label} does not exist yet; skipped")
                    continue
                while len(self.levels) <= node.l:
                    self.levels.append(self.new_level())
                level, loc = self.levels[node.l], pack_loc(no, line.offset, line.length)
                held = level.loc.get(node.i)
                # The same location is the same record, indexed after the checkpoint.
                if held != ABSENT and held != loc:
                    self.warnings.append(f"{where}: {label} was already built; ignored")
                    continue
                level.set(node.i, loc, node.size, node.flag)


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


def _scanner(
    chat_dir: Path, base: _Base | str, sizes: dict[str, int], readonly: bool, warnings: list[str]
) -> _Scanner:
    """A scanner of what the checkpoint lacks, or of everything when there is no checkpoint."""
    if isinstance(base, _Base):
        msg = OverlayTable(base.files.msg_table(), base.meta.messages)
        return _Scanner(
            chat_dir,
            base.meta.copy(),
            msg,
            base.levels,
            base.keys,
            _new_overlay_level,
            warnings,
            sizes,
        )
    if sizes:
        warnings.append(f"rebuilding the index of {chat_dir}: {base}")
    return _Scanner(
        chat_dir,
        Meta(new_build()),
        MemTable(LOC_WIDTH),
        [],
        keys.KeyStore(None, 0, track=not readonly),
        _new_mem_level,
        warnings,
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
    return _open_index(chat_dir, base, sizes, readonly, warnings)


def _open_index(
    chat_dir: Path, base: _Base | str, sizes: dict[str, int], readonly: bool, warnings: list[str]
) -> tuple[Index, dict[str, bytes]]:
    try:
        scanner = _scanner(chat_dir, base, sizes, readonly, warnings)
        scanner.messages()
        scanner.nodes()
        if readonly:
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
    return index, scanner.terms


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
    write_rebuild(index_dir, meta, scanner.msg.data, data, scanner.keys.staged)
    files = IndexFiles.open(index_dir, meta, writable=True)
    for level, level_files in zip(scanner.levels, files.levels, strict=True):
        level.loc, level.files = level_files.loc, level_files
    conn = keys.connect(index_dir / keys.KEYS_NAME)
    key_store = keys.KeyStore(conn, 1 << 62)
    return Index(chat_dir, meta, files.msg_table(), scanner.levels, key_store, files)
