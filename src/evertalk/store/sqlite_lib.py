"""The SQLite library the search index runs on.

Forgetting needs FTS5's `secure-delete` (SQLite 3.42): with it a deleted row's words leave the
index's pages at once, so a forget rewrites the few pages that held them. Without it they stay
in the index's segments until every segment is merged into one, which at a million messages
takes seconds. Where the system's SQLite is older (Debian 12 ships 3.40), the `pysqlite3-binary`
wheel brings a current one; elsewhere the standard library's is used, and an old one falls back
to the full merge (see search_index.compact).

The type checker reads the standard module: the two share one interface.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import sqlite3
else:
    try:
        from pysqlite3 import dbapi2 as sqlite3
    except ImportError:
        import sqlite3

SECURE_DELETE = sqlite3.sqlite_version_info >= (3, 42, 0)
"""Whether FTS5 can take a row's words out of its pages as the row is deleted."""

__all__ = ["SECURE_DELETE", "sqlite3"]
