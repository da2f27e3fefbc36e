"""Arrays of fixed-size records, in memory or in a file, and the 16-byte location record.

A location `(offset, length, file_no)` says where a record's line is; all zero means "absent",
which no real line can be since every line holds at least its newline.
"""

from __future__ import annotations

import os
import struct
import sys
from array import array
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal, Protocol

from evertalk.store.secure import read_all, write_all

_LOC = struct.Struct("<QII")
LOC_WIDTH = _LOC.size
ABSENT = bytes(LOC_WIDTH)
WORD_CODE: Literal["L", "Q"] = "L" if array("L").itemsize == 8 else "Q"
"""The array code of an unsigned 64-bit word: "L" where a C long has 64 bits, as on every
64-bit Unix, since CPython converts an int to it without the generic path "Q" takes (three
times as fast for the words of a location)."""


def pack_loc(file_no: int, offset: int, length: int) -> bytes:
    return _LOC.pack(offset, length, file_no)


def pack_locs(file_no: int, offsets: Iterable[int], lengths: Iterable[int]) -> bytes:
    """The locations of many lines of one file, each packed as `pack_loc` packs it, with no
    Python step per line (a rebuild packs a million of them)."""
    starts = array(WORD_CODE, offsets)
    sizes = array("I", lengths)  # as pack_loc, a length of 4 GiB or more is an OverflowError
    files = array("I", [file_no]) * len(sizes)
    if sys.byteorder == "big":  # the records are little-endian
        for column in (starts, sizes, files):
            column.byteswap()
    records = bytearray(len(starts) * LOC_WIDTH)
    with memoryview(records) as raw, raw.cast(WORD_CODE) as words, raw.cast("I") as halves:
        words[0::2], halves[2::4], halves[3::4] = starts, sizes, files
    return bytes(records)


def join_words(firsts: array[int] | memoryview, seconds: array[int] | memoryview) -> bytearray:
    """Location records from their two words, each given in a native WORD_CODE array (or a
    view of one) of the same length: read as two little-endian uint64, a record is its offset,
    then its length + (file no << 32)."""
    records = bytearray(len(firsts) * LOC_WIDTH)
    with memoryview(records) as raw, raw.cast(WORD_CODE) as words:
        words[0::2], words[1::2] = firsts, seconds
    if sys.byteorder == "big":
        swapped = array(WORD_CODE, records)
        swapped.byteswap()
        records[:] = swapped.tobytes()
    return records


@dataclass(frozen=True, slots=True)
class Loc:
    """A location record unpacked: where a line is in the log file numbered `file_no`."""

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

    def put_run(self, k: int, records: bytes) -> None:
        """Write consecutive records from record k on, as `put` would one by one."""


class MemTable:
    """A table in a bytearray: a rebuild, and read-only opens that cannot trust the files."""

    def __init__(self, width: int, data: bytes | bytearray = b"") -> None:
        self.width = width
        self.data = bytearray(data)

    @classmethod
    def adopt(cls, width: int, data: bytearray) -> MemTable:
        """A table over `data` itself, not a copy: a rebuild's tables are tens of megabytes."""
        table = cls(width)
        table.data = data
        return table

    def get(self, k: int) -> bytes:
        start = k * self.width
        raw = bytes(self.data[start : start + self.width])
        return raw if len(raw) == self.width else bytes(self.width)

    def put(self, k: int, record: bytes) -> None:
        start = k * self.width
        if len(self.data) < start:
            self.data.extend(bytes(start - len(self.data)))
        self.data[start : start + self.width] = record

    def put_run(self, k: int, records: bytes) -> None:
        start = k * self.width
        if len(self.data) < start:
            self.data.extend(bytes(start - len(self.data)))
        self.data[start : start + len(records)] = records


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

    def put_run(self, k: int, records: bytes) -> None:
        self.put(k, records)

    def read_into(self, buffer: memoryview) -> int:
        """Fill `buffer` from the table's first byte on; the bytes read, fewer only at the end
        of the file."""
        done = 0
        while done < len(buffer):
            got = os.preadv(self.fd, [buffer[done:]], done)
            if not got:
                break
            done += got
        return done

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

    def put_run(self, k: int, records: bytes) -> None:
        width = self.width
        for n in range(len(records) // width):
            self.changes[k + n] = records[n * width : (n + 1) * width]
