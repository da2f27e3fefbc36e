"""The search index's SQLite file: opening it with its schema in place, and telling a damaged
file from one that is only busy or cannot be written (see search_index.py)."""

from __future__ import annotations

import os
from pathlib import Path

from evertalk.store.errors import describe
from evertalk.store.secure import open_file
from evertalk.store.sqlite_lib import SECURE_DELETE, sqlite3

VERSION = "2"
"""2: every page freed is overwritten with zeros from the start (`secure_delete`), so that a
forget leaves no old copy of a row in the free pages. A file of another version is built again."""
WAIT_S = 60.0

SCHEMA = (
    "CREATE TABLE IF NOT EXISTS state (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS files (name TEXT PRIMARY KEY, offset INTEGER NOT NULL, "
    "tail TEXT NOT NULL)",
    "CREATE VIRTUAL TABLE IF NOT EXISTS hits USING fts5(text, kind UNINDEXED, "
    "tokenize = 'unicode61 remove_diacritics 2')",
)
HITS_SCHEMA = SCHEMA[2]


def connect(path: Path) -> sqlite3.Connection:
    """A connection in autocommit mode (transactions are explicit), the schema in place."""
    fd, created = open_file(path, os.O_RDWR)  # created 0600: SQLite would leave it to the umask
    os.close(fd)
    conn = sqlite3.connect(path, timeout=WAIT_S, isolation_level=None)
    try:
        # Derived data: a crash costs a catch-up, so nothing is synced. WAL lets a search read
        # while another process adds; its side files take the database's mode.
        conn.execute("PRAGMA synchronous = OFF")
        # What a merge or a forget frees is zeroed at once: a free page keeps no old words.
        conn.execute("PRAGMA secure_delete = ON")
        if created or conn.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
            conn.execute("PRAGMA journal_mode = WAL")
        conn.execute("BEGIN IMMEDIATE")
        for statement in SCHEMA:
            conn.execute(statement)
        conn.execute("INSERT OR IGNORE INTO state (key, value) VALUES ('version', ?)", (VERSION,))
        version = conn.execute("SELECT value FROM state WHERE key = 'version'").fetchone()[0]
        if SECURE_DELETE:
            _delete_securely(conn)
        conn.execute("COMMIT")
        conn.execute("SELECT rowid FROM hits ORDER BY rowid DESC LIMIT 1").fetchall()
    except BaseException:
        conn.close()
        raise
    if version != VERSION:
        conn.close()
        raise Outdated(f"it was made by another version of evertalk ({version}, not {VERSION})")
    return conn


class Outdated(sqlite3.DatabaseError):
    """The file is sound but of another version: it is built again, as a damaged one is."""


def _delete_securely(conn: sqlite3.Connection) -> None:
    """Have FTS5 take a deleted row's words out of the index's pages (see sqlite_lib). An index
    built without it may still hold the words of rows deleted before: one full merge takes them
    out, once."""
    row = conn.execute("SELECT v FROM hits_config WHERE k = 'secure-delete'").fetchone()
    if row is not None and row[0] == 1:
        return
    conn.execute("INSERT INTO hits (hits, rank) VALUES ('secure-delete', 1)")
    conn.execute("INSERT INTO hits (hits) VALUES ('optimize')")


def remove(path: Path) -> None:
    for suffix in ("", "-wal", "-shm", "-journal"):
        Path(f"{path}{suffix}").unlink(missing_ok=True)


def cannot_write(error: sqlite3.OperationalError) -> bool:
    text = str(error)
    return any(words in text for words in ("readonly", "unable to open", "locked", "full"))


def damaged(error: sqlite3.DatabaseError) -> bool:
    """Whether `error` says the file is not what it should be (rather than busy or unwritable)."""
    if isinstance(error, sqlite3.OperationalError):
        return not cannot_write(error) and "disk I/O" not in str(error)
    return not isinstance(error, sqlite3.ProgrammingError)


def locked(error: BaseException) -> bool:
    return isinstance(error, sqlite3.OperationalError) and "locked" in str(error)


def why(error: BaseException) -> str:
    return describe(error) if isinstance(error, OSError) else str(error)
