"""Private folders and files: 0700 and 0600 set at creation, not left to the umask (SPEC §1.7).

The log holds everything the user ever said, so no file of it may exist, even for a moment, with
wider permissions than its owner's.
"""

from __future__ import annotations

import os
from pathlib import Path

DIR_MODE = 0o700
FILE_MODE = 0o600


def fsync_dir(path: Path) -> None:
    """Make the folder's entries (new names, renames) durable."""
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def make_dir(path: Path) -> bool:
    """Create `path` (and missing parents) as 0700 folders; True when `path` itself was created."""
    if path.is_dir():
        return False
    parent = path.parent
    if parent != path:
        make_dir(parent)
    try:
        os.mkdir(path, DIR_MODE)
    except FileExistsError:
        if path.is_dir():
            return False
        raise
    # mkdir's mode is filtered by the umask; chmod is not.
    os.chmod(path, DIR_MODE)
    fsync_dir(parent)
    return True


def open_file(path: Path, flags: int) -> tuple[int, bool]:
    """Open `path` with `flags`, creating it as 0600 if missing; returns (fd, created)."""
    try:
        fd = os.open(path, flags | os.O_CREAT | os.O_EXCL, FILE_MODE)
    except FileExistsError:
        return os.open(path, flags), False
    os.fchmod(fd, FILE_MODE)
    return fd, True


def write_all(fd: int, data: bytes | bytearray | memoryview, offset: int | None = None) -> None:
    """Write every byte; a regular file can take a large buffer in more than one call."""
    view = memoryview(data)
    while view:
        if offset is None:
            done = os.write(fd, view)
        else:
            done = os.pwrite(fd, view, offset)
            offset += done
        view = view[done:]


def write_synced(path: Path, data: bytes | bytearray, flags: int) -> None:
    """Write `data` to `path` opened with `flags` (see `open_file`), on disk before this
    returns (the folder's entry is the caller's to fsync)."""
    fd, _ = open_file(path, os.O_WRONLY | flags)
    try:
        write_all(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


def read_all(fd: int, length: int, offset: int) -> bytes:
    """Read up to `length` bytes at `offset`, fewer only at the end of the file."""
    parts: list[bytes] = []
    while length > 0:
        part = os.pread(fd, length, offset)
        if not part:
            break
        parts.append(part)
        length -= len(part)
        offset += len(part)
    return b"".join(parts)


def write_atomic(path: Path, data: bytes, *, durable: bool = True) -> None:
    """Replace `path` with `data` so that a crash leaves either the old or the new content.
    `durable` False skips the fsyncs, for a file that is only ever a hint (a power cut may then
    leave it empty; a process crash cannot)."""
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
    try:
        # A leftover temporary file from a crash keeps its old mode unless we set it.
        os.fchmod(fd, FILE_MODE)
        write_all(fd, data)
        if durable:
            os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, path)
    if durable:
        fsync_dir(path.parent)
