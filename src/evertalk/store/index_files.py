"""The files of `chat/index/`, all derived from the log and rebuildable from it.

    msg.loc        16-byte locations, record k = message k
    tree-L.loc     16-byte locations, record i = node (L, i); all zero = not built
    tree-L.size    uint32 (native order), the byte size of node (L, i)'s text
    tree-L.flag    one byte: 0 unbuilt, 1 built by the model, 2 free, 3 cut
    keys.db        SQLite: idempotency key → message id
    meta.json      the checkpoint (see meta.py)

Files grow with zero holes, since nodes are built out of order. Records past the checkpoint's
counts are not trusted: an open truncates them away and derives them again from the log's tail.
"""

from __future__ import annotations

import os
import struct
import sys
from array import array
from dataclasses import dataclass
from pathlib import Path

from evertalk.memory.text import LINE_LIMIT
from evertalk.memory.tree import CUT
from evertalk.store.meta import Meta
from evertalk.store.secure import open_file
from evertalk.store.tables import LOC_WIDTH, FileTable

MSG_LOC = "msg.loc"
SIZE = struct.Struct("=I")
SIZE_CODE = "I"
assert array(SIZE_CODE).itemsize == SIZE.size, "array('I') must hold 32-bit sizes"

# Where each byte of a native uint32 size sits, to check a whole level's sizes with C-speed bytes
# operations rather than a Python loop over a million numbers at every open.
_LITTLE = sys.byteorder == "little"
_HIGH = (2, 3) if _LITTLE else (0, 1)  # bits 16-31
_MID = 1 if _LITTLE else 2  # bits 8-15
_LOW = 0 if _LITTLE else 3  # bits 0-7
_LIMIT_MID, _LIMIT_LOW = divmod(LINE_LIMIT, 256)
_MID_VALUES = bytes(range(_LIMIT_MID + 1))
assert LINE_LIMIT < 1 << 16
_FLAG_VALUES = bytes(range(CUT + 1))


class StaleIndex(Exception):
    """The index files cannot be trusted; the message says why."""


def level_names(level: int) -> tuple[str, str, str]:
    return f"tree-{level}.loc", f"tree-{level}.size", f"tree-{level}.flag"


def _level_files(index_dir: Path, level: int) -> list[tuple[Path, int]]:
    """Each file of a level with the width of its records."""
    widths = (LOC_WIDTH, SIZE.size, 1)
    return [(index_dir / name, w) for name, w in zip(level_names(level), widths, strict=True)]


def sizes_fit(raw: bytes | memoryview) -> bool:
    """Whether every native uint32 in `raw` is at most LINE_LIMIT, the most a node can hold."""
    zeros = bytes(len(raw) // SIZE.size)
    if raw[_HIGH[0] :: SIZE.size] != zeros or raw[_HIGH[1] :: SIZE.size] != zeros:
        return False
    mid = bytes(raw[_MID :: SIZE.size])
    if mid.translate(None, _MID_VALUES):
        return False
    at = mid.find(_LIMIT_MID)
    while at >= 0:  # sizes from LINE_LIMIT rounded down to 256 on: rare, so a loop is cheap
        if raw[at * SIZE.size + _LOW] > _LIMIT_LOW:
            return False
        at = mid.find(_LIMIT_MID, at + 1)
    return True


def check_level(level: int, raw_sizes: bytes | memoryview, flags: bytes | bytearray) -> None:
    """StaleIndex when a level's files hold values no node can have (the files were damaged)."""
    _, size_name, flag_name = level_names(level)
    if flags.translate(None, _FLAG_VALUES):
        raise StaleIndex(f"{flag_name} holds a flag no node can have")
    if not sizes_fit(raw_sizes):
        raise StaleIndex(f"{size_name} holds a size over {LINE_LIMIT} bytes")


@dataclass(slots=True)
class LevelFiles:
    """The three files of one tree level: locations, sizes and flags."""

    loc: FileTable
    size: FileTable
    flag: FileTable

    def tables(self) -> tuple[FileTable, FileTable, FileTable]:
        return self.loc, self.size, self.flag

    def load(self, level: int, count: int, *, check: bool) -> tuple[array[int], bytearray]:
        """The level's sizes and flags, each read straight into its array (no copy of a level
        in between: at a million messages a copy of them all is ten megabytes); with `check`,
        StaleIndex when a value is impossible."""
        sizes = array(SIZE_CODE, [0]) * count
        flags = bytearray(count)
        # The views go before the arrays can grow (a node built at run time).
        with memoryview(sizes) as words, words.cast("B") as raw, memoryview(flags) as flag_bytes:
            read = self.size.read_into(raw), self.flag.read_into(flag_bytes)
            if read != (len(raw), count):
                raise StaleIndex(f"the files of tree level {level} are shorter than meta.json says")
            if check:
                check_level(level, raw, flags)
        return sizes, flags

    def written_ns(self) -> int:
        """When the sizes or the flags were last written."""
        return max(os.fstat(table.fd).st_mtime_ns for table in (self.size, self.flag))

    def write(self, i: int, loc: bytes, size: int, flag: int) -> None:
        # The location goes last: a crash in between leaves it absent, and a node whose location
        # is absent is taken from the log again on the next open.
        self.size.put(i, SIZE.pack(size))
        self.flag.put(i, bytes((flag,)))
        self.loc.put(i, loc)


def _open_table(path: Path, width: int, writable: bool) -> FileTable:
    try:
        fd = os.open(path, os.O_RDWR if writable else os.O_RDONLY)
    except FileNotFoundError:
        raise StaleIndex(f"{path.name} is missing") from None
    return FileTable(fd, width)


class IndexFiles:
    """Open descriptors on the index files, for lookups and, when writable, for updates."""

    def __init__(self, index_dir: Path, writable: bool) -> None:
        self.dir = index_dir
        self.writable = writable
        self.msg: FileTable | None = None
        self.levels: list[LevelFiles] = []

    @classmethod
    def open(cls, index_dir: Path, meta: Meta, *, writable: bool) -> IndexFiles:
        """Open the files the checkpoint names; StaleIndex when one is shorter than it says."""
        files = cls(index_dir, writable)
        try:
            files.msg = _open_table(index_dir / MSG_LOC, LOC_WIDTH, writable)
            files._check(files.msg, meta.messages)
            for level, count in enumerate(meta.levels):
                loc, size, flag = (
                    _open_table(path, width, writable)
                    for path, width in _level_files(index_dir, level)
                )
                files.levels.append(LevelFiles(loc, size, flag))
                for table in (loc, size, flag):
                    files._check(table, count)
        except BaseException:
            files.close()
            raise
        return files

    @staticmethod
    def _check(table: FileTable, count: int) -> None:
        if len(table) < count:
            raise StaleIndex(f"an index file holds {len(table)} records, not {count}")

    def read_only(self) -> None:
        """Use the files for reads only from now on (an index over them will write nothing)."""
        self.writable = False

    def msg_table(self) -> FileTable:
        assert self.msg is not None
        return self.msg

    def level(self, level: int) -> LevelFiles:
        """A level's files, created empty when the level is new to the checkpoint."""
        while len(self.levels) <= level:
            new = len(self.levels)
            tables = []
            for path, width in _level_files(self.dir, new):
                fd, _ = open_file(path, os.O_RDWR)
                table = FileTable(fd, width)
                table.truncate(0)  # a leftover of records past an old checkpoint
                tables.append(table)
            self.levels.append(LevelFiles(*tables))
        return self.levels[level]

    def truncate(self, meta: Meta) -> None:
        """Cut every file back to the checkpoint's counts."""
        self.msg_table().truncate(meta.messages)
        for level, files in enumerate(self.levels):
            count = meta.levels[level] if level < len(meta.levels) else 0
            for table in files.tables():
                table.truncate(count)

    def sync(self) -> None:
        for table in self._all():
            table.sync()

    def close(self) -> None:
        for table in self._all():
            table.close()
        self.msg, self.levels = None, []

    def _all(self) -> list[FileTable]:
        tables = [self.msg] if self.msg is not None else []
        for files in self.levels:
            tables.extend(files.tables())
        return tables
