"""Waiting for the other machines' changes: `Listener`, over a connection of its own.

Every change ends with a NOTIFY on the chat's channel, delivered at its commit (chats.py; the
channel is named from a secret only the chat's role can read). A listener LISTENs on that
channel from the start, so a change committed after any of its reads wakes it, whether the
notification comes while it waits or while it reads (psycopg keeps those for the next wait). A
notification only wakes it: what it returns is always read from the feed by a query, so a
lost, merged or stale notification costs a timeout or a read, never a change. The order the
changes are folded in is `Follower`'s business (follow.py).

One thread at a time uses a listener, as psycopg's connections are used.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from time import monotonic

import psycopg
from psycopg import sql

from evertalk.pgstore import chats
from evertalk.pgstore.chats import Change
from evertalk.pgstore.connect import Connection, connect, one_line
from evertalk.pgstore.errors import PgStoreError
from evertalk.pgstore.url import parse_url


class Listener:
    """The changes of chat `chat` as they are committed, on a connection opened for this alone:
    from `source`, a postgresql:// URL or a function returning a new connection."""

    def __init__(self, source: str | Callable[[], Connection], chat: int) -> None:
        self.chat = chat
        if isinstance(source, str):
            self._url: str | None = source
            self.conn = connect(source)
            self.where = parse_url(source).where
        else:
            self._url = None
            self.conn = source()
            self.where = _where(self.conn)
        try:
            with self._errors("listen to the chat"):
                self.conn.autocommit = True  # notifications come only between transactions
                self.channel = chats.channel(chats.chat_secret(self.conn, chat))
                self.conn.execute(sql.SQL("LISTEN {}").format(sql.Identifier(self.channel)))
        except BaseException:
            self.conn.close()
            raise

    def wait(self, after_seq: int, timeout: float | None) -> list[Change]:
        """The changes committed after sequence number `after_seq`, in order: at once if there
        are some, else as soon as one is committed; empty when `timeout` seconds (None: no
        limit) pass first."""
        deadline = None if timeout is None else monotonic() + max(timeout, 0.0)
        with self._errors("follow the chat"):
            self._drain()
            while True:
                changes = chats.changes_since(self.conn, self.chat, after_seq)
                if changes:
                    return changes
                left = None if deadline is None else deadline - monotonic()
                if left is not None and left <= 0:
                    return []
                if not self._woken(left):
                    return []

    def _drain(self) -> None:
        """Drop the notifications already come: the read that follows sees their changes."""
        for _ in self.conn.notifies(timeout=0):
            pass

    def _woken(self, timeout: float | None) -> bool:
        """Whether a notification came within `timeout` seconds (at once when one came during
        the last read)."""
        # run to its end: the generator gives back the connection's lock and backlog only then
        return bool(list(self.conn.notifies(timeout=timeout, stop_after=1)))

    @contextmanager
    def _errors(self, doing: str) -> Iterator[None]:
        try:
            yield
        except psycopg.Error as error:
            line = one_line(error, self._url)
            if self.conn.closed or self.conn.broken:
                raise PgStoreError(
                    f"lost the connection to the database at {self.where}: {line}"
                ) from None
            raise PgStoreError(f"cannot {doing} at {self.where}: {line}") from None

    def close(self) -> None:
        """Close the listener's connection (again: nothing)."""
        self.conn.close()

    def __enter__(self) -> Listener:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()


def _where(conn: Connection) -> str:
    """HOST:PORT/DB of a connection, for messages."""
    try:
        info = conn.info
        return f"{info.host}:{info.port}/{info.dbname}"
    except psycopg.Error:  # closed already: the first use says so
        return "an unknown address"
