"""JSON Lines files a line at a time: what a line holds, durable appends (SPEC §1.3), the end of
a torn last line (§1.4), and reads of one line where the index says it is. Scanning a whole file
by the torn-line rules is jsonl.py's.
"""

from __future__ import annotations

import json
import os
from collections import OrderedDict
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from evertalk.store.errors import StoreError, describe
from evertalk.store.secure import fsync_dir, open_file, read_all

# What the next append must write first after a torn last line: a newline ends the torn line; if
# the torn bytes parse as JSON, `#` keeps them from ever passing for a record.
TERM_NONE = b""
TERM_NEWLINE = b"\n"
TERM_HASH = b"#\n"

Write = Callable[[int, bytes], int]
"""What puts an append's bytes in its file: os.write's signature."""

_writers: list[Write] = []  # set by `writing_with`; none: os.write


@contextmanager
def writing_with(write: Write) -> Iterator[None]:
    """Every append made meanwhile writes through `write`: the seam where a test makes the
    disk fail (ENOSPC) without filling one."""
    _writers.append(write)
    try:
        yield
    finally:
        _writers.remove(write)


def _write(fd: int, data: bytes) -> int:
    return _writers[-1](fd, data) if _writers else os.write(fd, data)


def parse_object(raw: bytes) -> dict[str, Any] | str | None:
    """The object on a line, None if it is JSON but not an object, or the reason it is not JSON."""
    try:
        value = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return "not valid JSON"
    return value if isinstance(value, dict) else None


def torn_terminator(torn: bytes) -> bytes:
    """SPEC §1.4: `#\\n` when the torn bytes parse as JSON (only the newline was lost)."""
    try:
        json.loads(torn.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return TERM_NEWLINE
    return TERM_HASH


def end_torn_line(path: Path, term: bytes) -> int:
    """Write a torn last line's terminator (SPEC §1.4) on its own, durably; the file's new
    size. OSError when it cannot (the line is then ended by the file's next append)."""
    fd = os.open(path, os.O_WRONLY | os.O_APPEND)
    try:
        if os.write(fd, term) != len(term):
            raise OSError(f"{path}: short write of a torn line's end")
        os.fsync(fd)
        return os.lseek(fd, 0, os.SEEK_END)
    finally:
        os.close(fd)


class Appender:
    """Appends whole lines, one write and one fsync each, keeping recent files open.

    A write of derived records (`durable=False`: free nodes, which an open builds again when
    they are lost) skips its fsync; `sync` makes such writes durable when something durable is
    about to name them (an index checkpoint), and so does a file closed to make room for
    another (a checkpoint after it could not sync it). Closing them all does not sync them.
    """

    def __init__(self, max_open: int = 4) -> None:
        self._fds: OrderedDict[Path, int] = OrderedDict()
        self._max_open = max_open  # a chat that runs for weeks moves on to new day files
        self._failed: str | None = None
        self._unsynced: set[int] = set()

    @property
    def failed(self) -> str | None:
        """Why an append failed: none is taken until the log is opened again."""
        return self._failed

    def append(self, path: Path, data: bytes, prefix: bytes = b"") -> tuple[int, int]:
        """Write `prefix + data + \n` and make it durable; returns (offset of data, its length)."""
        return self.append_lines(path, [data], prefix)[0]

    def append_lines(
        self, path: Path, lines: list[bytes], prefix: bytes = b"", *, durable: bool = True
    ) -> list[tuple[int, int]]:
        """Write `prefix` and each line with its `\n`, in one write and one fsync; returns each
        line's (offset, length with its newline).

        The single write keeps a crash from interleaving half a record with the next one, and
        makes the pages of a long message land together or be torn together; the fsync makes
        the records count only once they are on disk (SPEC §1.3).
        """
        if self._failed is not None:
            # After a failed append the file may or may not hold the line; only a reopen, which
            # scans the file, can tell which id comes next.
            raise StoreError(f"the log cannot take more appends until reopened: {self._failed}")
        data = b"".join([prefix, *(line + b"\n" for line in lines)])
        try:
            fd, created = self._fd(path)
            done = _write(fd, data)
            if done != len(data):
                self._failed = f"{path}: only {done} of {len(data)} bytes written (disk full?)"
                raise StoreError(self._failed)
            offset = os.lseek(fd, 0, os.SEEK_CUR) - len(data) + len(prefix)
            if durable:
                os.fsync(fd)
                self._unsynced.discard(fd)
            else:
                self._unsynced.add(fd)
            if created:
                fsync_dir(path.parent)
        except OSError as error:
            self._failed = f"cannot append to the log: {describe(error)}"
            raise StoreError(self._failed) from None
        spans = []
        for line in lines:
            spans.append((offset, len(line) + 1))
            offset += len(line) + 1
        return spans

    def _fd(self, path: Path) -> tuple[int, bool]:
        fd = self._fds.get(path)
        if fd is not None:
            self._fds.move_to_end(path)
            return fd, False
        fd, created = open_file(path, os.O_WRONLY | os.O_APPEND)
        while len(self._fds) >= self._max_open:
            self._close(self._fds.popitem(last=False)[1])
        self._fds[path] = fd
        return fd, created

    def sync(self) -> None:
        """Make every write so far durable."""
        if self._failed is not None:
            raise StoreError(f"the log cannot be synced until reopened: {self._failed}")
        try:
            for fd in sorted(self._unsynced):
                os.fsync(fd)
                self._unsynced.discard(fd)
        except OSError as error:
            self._failed = f"cannot sync the log: {describe(error)}"
            raise StoreError(self._failed) from None

    def _close(self, fd: int, *, sync: bool = True) -> None:
        try:
            if fd in self._unsynced:
                self._unsynced.discard(fd)
                if sync:
                    os.fsync(fd)
        finally:
            os.close(fd)

    def close(self) -> None:
        fds, self._fds = self._fds, OrderedDict()
        for fd in fds.values():
            with suppress(OSError):  # a free node lost here is built again at the next open
                self._close(fd, sync=False)


class Reader:
    """Reads byte ranges of a folder's log files, keeping a few descriptors open (a chat has
    many days). Files are named relative to the folder, as the index names them."""

    def __init__(self, folder: Path, max_open: int = 16) -> None:
        self._folder = folder
        self._fds: OrderedDict[str, int] = OrderedDict()
        self._max_open = max_open

    def read(self, name: str, offset: int, length: int) -> bytes:
        fd = self._fds.pop(name, None)
        if fd is None:
            fd = os.open(self._folder / name, os.O_RDONLY)
            while len(self._fds) >= self._max_open:
                os.close(self._fds.popitem(last=False)[1])
        self._fds[name] = fd
        return read_all(fd, length, offset)

    def close(self) -> None:
        fds, self._fds = self._fds, OrderedDict()
        for fd in fds.values():
            os.close(fd)
