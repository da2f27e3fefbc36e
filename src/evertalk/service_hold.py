"""A hold on a home's service: a command that must own the chat's files itself (`memory
repair`) asks every client not to start a service while it runs.

The hold is `<home>/service.hold`, locked (flock) by the command for as long as it runs, with
what it is and its pid inside for the clients to say. A lock, not the file alone: a command
that dies lets go of it, and no stale file can keep the service from starting. Standard library
only, as the rest of a client's connection; below both sides, which both use it.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
from collections.abc import Iterator
from pathlib import Path

HOLD_NAME = "service.hold"


class Held(Exception):
    """Another command holds the service: its one line."""


@contextlib.contextmanager
def holding(home: Path, what: str) -> Iterator[None]:
    """No client starts the service of `home` inside this block. Held when another command
    holds it already."""
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    path = home / HOLD_NAME
    descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o600)
    try:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise Held(_holder_line(_read(descriptor))) from None
        os.ftruncate(descriptor, 0)
        os.write(descriptor, json.dumps({"what": what, "pid": os.getpid()}).encode())
        try:
            yield
        finally:
            # gone before the lock is: a client that finds no file starts the service
            with contextlib.suppress(OSError):
                path.unlink()
    finally:
        os.close(descriptor)


def held_by(home: Path) -> str | None:
    """Why no service may start now (`memory repair (pid 4242) is working on the chat…`), or
    None when nothing holds it."""
    try:
        descriptor = os.open(home / HOLD_NAME, os.O_RDONLY)
    except OSError:
        return None
    try:
        try:
            fcntl.flock(descriptor, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _holder_line(_read(descriptor))
        return None
    finally:
        os.close(descriptor)


def _read(descriptor: int) -> dict[str, object]:
    try:
        found = json.loads(os.pread(descriptor, 4096, 0) or b"{}")
    except (OSError, ValueError):
        return {}
    return found if isinstance(found, dict) else {}


def _holder_line(holder: dict[str, object]) -> str:
    what = str(holder.get("what") or "another evertalk command")
    pid = holder.get("pid")
    who = f"{what} (pid {pid})" if isinstance(pid, int) else what
    return f"{who} is working on the chat's files: the service starts again once it ends"
