"""Helpers for the store's tests (a module of its own name, so tests can import it)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from evertalk.store import ChatStore
from evertalk.store.lock import ChatLock


def snapshot(root: Path) -> dict[str, tuple[int, bytes]]:
    """Every folder and file under `root`: its mode and, for files, its bytes."""
    result: dict[str, tuple[int, bytes]] = {}
    for folder, dirs, files in os.walk(root):
        for name in dirs + files:
            path = Path(folder) / name
            content = path.read_bytes() if path.is_file() else b""
            result[str(path.relative_to(root))] = (path.stat().st_mode, content)
    return result


def crash(store: ChatStore) -> None:
    """Drop a store the way a killed process would: no checkpoint, no commit, lock released.

    Writes already made stay (they are in the OS's hands); the key database's open transaction
    is rolled back, as SQLite does for a process that died.
    """
    index = store._index
    if index.keys.conn is not None:
        index.keys.conn.rollback()
        index.keys.conn.close()
        index.keys.conn = None
    if index.files is not None:
        index.files.close()
    store._appender.close()
    store._reader.close()
    if store._lock is not None:
        store._lock.release()
    store._closed = True


@contextmanager
def lock_held(chat: Path) -> Iterator[None]:
    """The chat's lock held, as by an owner: a reader opened meanwhile writes nothing."""
    lock = ChatLock.acquire(chat)
    try:
        yield
    finally:
        lock.release()
