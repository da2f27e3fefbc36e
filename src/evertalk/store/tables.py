"""Arrays of fixed-size records, in memory or in a file, and the 16-byte location record.

A location `(offset, length, file_no)` says where a record's line is; all zero means "absent",
which no real line can be since every line holds at least its newline.
"""

from __future__ import annotations

import os
import struct
from dataclasses import dataclass
from typing import Protocol

from evertalk.store.secure import read_all, write_all

_LOC = struct.Struct("<QII")
LOC_WIDTH = _LOC.size
ABSENT = bytes(LOC_WIDTH)


def pack_loc(file_no: int, offset: int, length: int) -> bytes:
    return _LOC.pack(offset, length, file_no)


@dataclass(frozen=True, slots=True)
class Loc:
    file_no: int
    offset: int
    length: int

    @staticmethod
    def unpack(raw: bytes) -> Loc | None:
        if raw == ABSENT:
            return None
        offset, length, file_no = _LOC.unpack(raw)
        return Loc(file_no, offset, length)


class Table(Protocol):
    width: int

    def get(self, k: int) -> bytes:
        """Record k; zero bytes beyond the end."""

    def put(self, k: int, record: bytes) -> None:
        """Write record k, growing the table with zero records as needed."""


class MemTable:
    """A table in a bytearray: a rebuild, and read-only opens that cannot trust the files."""

    def __init__(self, width: int, data: bytes | bytearray = b"") -> None:
        self.width = width
        self.data = bytearray(data)

    def get(self, k: int) -> bytes:
        start = k * self.width
        raw = bytes(self.data[start : start + self.width])
        return raw if len(raw) == self.width else bytes(self.width)

    def put(self, k: int, record: bytes) -> None:
        start = k * self.width
        if len(self.data) < start:
            self.data.extend(bytes(start - len(self.data)))
        self.data[start : start + self.width] = record


class FileTable:
    """A table in a file, read and written one record at a time (seek-free pread/pwrite)."""

    def __init__(self, fd: int, width: int) -> None:
        self.width = width
        self.fd = fd
        self.dirty = False

    def __len__(self) -> int:
        return os.fstat(self.fd).st_size // self.width

    def get(self, k: int) -> bytes:
        raw = read_all(self.fd, self.width, k * self.width)
        return raw if len(raw) == self.width else bytes(self.width)

    def put(self, k: int, record: bytes) -> None:
        write_all(self.fd, record, k * self.width)
        self.dirty = True

    def head(self, count: int) -> bytes:
        """The first `count` records in one read."""
        return read_all(self.fd, count * self.width, 0)

    def truncate(self, count: int) -> None:
        # Only when it changes the file: every open cuts every file back to the checkpoint,
        # and a needless cut would cost a fsync at close and make the file look written since.
        if os.fstat(self.fd).st_size != count * self.width:
            os.ftruncate(self.fd, count * self.width)
            self.dirty = True

    def sync(self) -> None:
        if self.dirty:
            os.fsync(self.fd)
            self.dirty = False

    def close(self) -> None:
        os.close(self.fd)


class OverlayTable:
    """Changes held in memory over a table that must not be written (yet).

    Only the base's first `limit` records count: those the checkpoint vouches for.
    """

    def __init__(self, base: Table, limit: int) -> None:
        self.width = base.width
        self.base = base
        self.limit = limit
        self.changes: dict[int, bytes] = {}

    def get(self, k: int) -> bytes:
        record = self.changes.get(k)
        if record is not None:
            return record
        return self.base.get(k) if k < self.limit else bytes(self.width)

    def put(self, k: int, record: bytes) -> None:
        self.changes[k] = record
