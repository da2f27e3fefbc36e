"""Idempotency keys (SPEC §1.2 `key`): key → message id, in `index/keys.db`.

Rows are committed only at checkpoints, so the database never runs ahead of meta.json by more
than the log's tail, whose keys the next open scans again. Keys found by a scan are held in
memory until the scan is known to be good, because a scan that fails must write nothing.
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

from evertalk.store.secure import open_file

KEYS_NAME = "keys.db"
_SCHEMA = "CREATE TABLE IF NOT EXISTS keys (key TEXT PRIMARY KEY, i INTEGER NOT NULL)"


def connect(path: Path) -> sqlite3.Connection:
    """A connection to an existing keys.db."""
    # SQLite's default full sync is kept: commits only happen at checkpoints, where the keys
    # must be durable before meta.json vouches for them.
    conn = sqlite3.connect(path)
    conn.execute("SELECT 1 FROM keys LIMIT 1").fetchall()  # fails early on a damaged file
    return conn


def create(path: Path) -> sqlite3.Connection:
    """An empty keys.db at `path` (an existing file of that name is replaced)."""
    path.unlink(missing_ok=True)
    # Created here, so that it is 0600: SQLite would leave the mode to the umask.
    fd, _ = open_file(path, os.O_WRONLY)
    os.close(fd)
    conn = sqlite3.connect(path)
    conn.execute(_SCHEMA)
    conn.commit()
    return conn


class KeyStore:
    """Keys from the database (below `base`), then keys staged by a scan or added since.

    A read-only store appends nothing, so it needs no keys: `track=False` keeps none.
    """

    def __init__(self, conn: sqlite3.Connection | None, base: int, track: bool = True) -> None:
        self.conn = conn
        self.base = base
        self.track = track
        self.staged: dict[str, int] = {}

    def get(self, key: str) -> int | None:
        i = self.staged.get(key)
        if i is not None or self.conn is None:
            return i
        # Rows at or above `base` are from after the checkpoint; the scan restages them.
        row = self.conn.execute("SELECT i FROM keys WHERE key = ? AND i < ?", (key, self.base))
        found = row.fetchone()
        return int(found[0]) if found is not None else None

    def stage(self, key: str, i: int) -> None:
        """Remember a key found by a scan; the first record with a key keeps it."""
        if self.track and self.get(key) is None:
            self.staged[key] = i

    def flush(self) -> None:
        """Write the staged keys into the database (uncommitted until `commit`)."""
        if self.conn is None:
            return
        self.conn.execute("DELETE FROM keys WHERE i >= ?", (self.base,))
        self.conn.executemany(
            "INSERT OR IGNORE INTO keys (key, i) VALUES (?, ?)", self.staged.items()
        )
        self.staged = {}
        self.base = 1 << 62  # every row is now ours

    def add(self, key: str, i: int) -> None:
        if self.conn is None:
            self.staged[key] = i
        else:
            self.conn.execute("INSERT OR IGNORE INTO keys (key, i) VALUES (?, ?)", (key, i))

    def commit(self) -> None:
        if self.conn is not None:
            self.conn.commit()

    def close(self) -> None:
        if self.conn is not None:
            self.conn.close()
            self.conn = None
