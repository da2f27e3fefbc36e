"""Where a home's service listens and logs. Shared by the service and its clients: standard
library only, so that a client imports nothing heavy to find it (what only a deep home or the
service's log needs is loaded there)."""

from __future__ import annotations

import contextlib
import os
import socket
import stat
import struct
import sys
from pathlib import Path

SOCKET_NAME = "service.sock"
LOG_NAME = "service.log"
SOCKET_RECORD = "service.address"
"""In a deep home: the path of its socket, when the service listens in a private folder because
the shared one was taken (`service/socket_place.py`)."""
MAX_SOCKET_PATH = 100
"""Bytes of a Unix socket's path that every system takes (Linux 107, macOS 103)."""


def socket_path(home: Path) -> Path:
    """`<home>/service.sock`; for a home too deep for a socket's path, the one its record names,
    else a name derived from the home in the user's shared folder of the temporary directory."""
    path = home.resolve() / SOCKET_NAME
    if len(os.fsencode(path)) <= MAX_SOCKET_PATH:
        return path
    return recorded_socket(home) or shared_socket_path(home)


def socket_digest(home: Path) -> str:
    """A short name for a deep home's socket, the same for every client."""
    import hashlib

    return hashlib.sha256(os.fsencode(home.resolve())).hexdigest()[:20]


def shared_socket_path(home: Path) -> Path:
    """A deep home's socket in `<tmp>/evertalk-<uid>/`, a folder another user could take first;
    in `/tmp`'s when the temporary directory is itself too deep for a socket's path."""
    import tempfile

    name = f"evertalk-{os.getuid()}/{socket_digest(home)}.sock"
    path = Path(tempfile.gettempdir()) / name
    if len(os.fsencode(path)) <= MAX_SOCKET_PATH:
        return path
    return Path("/tmp") / name


def recorded_socket(home: Path) -> Path | None:
    """The socket path the home's record names, or None (no record, or not a socket's path)."""
    try:
        text = (home.resolve() / SOCKET_RECORD).read_text("utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None
    path = Path(text)
    fits = len(os.fsencode(path)) <= MAX_SOCKET_PATH
    return path if path.is_absolute() and path.suffix == ".sock" and fits else None


def log_path(home: Path) -> Path:
    return home / LOG_NAME


def log(line: str) -> None:
    """One line of the service's log (standard error: the log file when started by a client).
    A line the disk has no room for is dropped: the service goes on (a full disk is what it
    must live through)."""
    from datetime import datetime

    stamp = datetime.now().astimezone().isoformat(timespec="seconds")
    with contextlib.suppress(OSError):
        print(f"{stamp} [{os.getpid()}] {line}", file=sys.stderr, flush=True)


def is_private_folder(path: Path) -> bool:
    """Whether the socket `path` is in a private folder (a deep home's), rather than in its home."""
    return path.name != SOCKET_NAME


def socket_folder_problem(path: Path) -> str | None:
    """Why the folder of the socket `path` cannot be trusted, in one line; None when it can, or
    when it does not exist. Another user who owns it, or may write in it, could listen there in
    the service's place; the private folder of a deep home's socket must be 0700 as well."""
    folder = path.parent
    try:
        info = os.lstat(folder)
    except FileNotFoundError:
        return None
    if not stat.S_ISDIR(info.st_mode):
        return f"the socket's folder {folder} is not a folder (a link or a file)"
    if info.st_uid != os.getuid():
        return f"the socket's folder {folder} belongs to another user (uid {info.st_uid})"
    mode = stat.S_IMODE(info.st_mode)
    if is_private_folder(path) and mode & 0o077:
        return f"the socket's folder {folder} has mode {mode:04o}, not 0700"
    if mode & 0o022:
        return f"the socket's folder {folder} is writable by others (mode {mode:04o})"
    return None


def peer_uid(sock: socket.socket) -> int | None:
    """The user id of the process at the other end of a connected Unix socket; None on a system
    with no way to ask."""
    linux = getattr(socket, "SO_PEERCRED", None)
    if linux is not None:
        raw = sock.getsockopt(socket.SOL_SOCKET, linux, struct.calcsize("3i"))
        return int(struct.unpack("3i", raw)[1])
    if sys.platform == "darwin" or sys.platform.startswith("freebsd"):  # pragma: no cover
        # getpeereid(3) reads LOCAL_PEERCRED (level SOL_LOCAL = 0, option 1): a struct xucred,
        # whose first two unsigned ints are its version and the peer's uid
        raw = sock.getsockopt(0, 1, 76)
        return int(struct.unpack_from("2I", raw)[1])
    return None  # pragma: no cover
