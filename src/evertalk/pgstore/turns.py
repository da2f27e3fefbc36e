"""The chat's turn lock across machines: one turn at a time per chat, wherever it runs.

The lock is a session-level advisory lock on a connection of its own, so that it goes with its
session: released by the holder, or by the server when the holder's process dies (its socket
closes) or its machine does (the server's TCP keepalives, set on that session, find the
connection dead). Nothing has to expire, and no clock is read.

Others name the holder ("a turn runs on office") from `evertalk.turns`: each session that may
take the lock first writes a row of its machine under its server process id, and the holder is
the row whose process holds the lock now, as `pg_locks` shows it. A row left by a session that
died is never believed, since its process holds nothing; such rows are removed when another
session of the chat starts.

Row-level security does not cover advisory locks: any role may take a lock whose keys it can
name. The keys are drawn from the chat's secret (schema.py), which only the chat's role can
read; but pg_locks shows every role the keys of the locks held, so another role may learn them
while a turn runs, and hold them after. A session that finds the keys held by another role
moves the chat to keys drawn anew (`chats.lock_gen`, under row-level security) and takes those:
another role can hold the old keys, and block nothing.

Each take of the lock starts a new epoch of the chat's turns (`chats.turn_epoch`, bumped once
the lock is granted). A turn's appends carry its epoch, and the database refuses those of a
turn whose epoch is not the chat's any more: a machine whose session was dropped mid-turn (a
closed lid) cannot log after the turn another machine took since.
"""

from __future__ import annotations

import hashlib
import struct
import threading
from collections.abc import Callable
from types import TracebackType

import psycopg

from evertalk.pgstore.connect import Connection, driver_errors
from evertalk.pgstore.errors import PgStoreError

SESSION = (
    ("tcp_keepalives_idle", "30"),
    ("tcp_keepalives_interval", "10"),
    ("tcp_keepalives_count", "3"),
    ("idle_session_timeout", "0"),
)
"""The settings of the lock's session: the server probes its connection after 30 idle seconds,
then every 10, so that a machine that died (no socket closed) releases its lock about a minute
later; and an idle holder is never disconnected (which would give its turn away). A setting
the server does not know (idle_session_timeout before PostgreSQL 14) is left out."""

ConnectionFactory = Callable[[], Connection]

_HELD_BY = """
    SELECT l.pid FROM pg_locks AS l
    WHERE l.locktype = 'advisory' AND l.mode = 'ExclusiveLock' AND l.granted
      AND l.objsubid = 2
      AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
      AND l.classid = %(classid)s::bigint::oid AND l.objid = %(objid)s::bigint::oid
"""
"""The server process holding the lock, if one does (an exclusive lock has one holder)."""

_HOLDER_ROLE = f"""
    SELECT a.usename = current_user FROM pg_stat_activity AS a WHERE a.pid = ({_HELD_BY})
"""
"""Whether the lock's holder is a session of this role (None: no one holds it)."""

TRIES = 3
"""Takes of the lock one `try_take` makes at most: keys drawn anew, or moved meanwhile."""


def lock_keys(secret: str, generation: int) -> tuple[int, int]:
    """The two int4 keys of a chat's turn lock: drawn from the chat's secret, which only its
    role can read, and the generation of its keys (`chats.lock_gen`)."""
    digest = hashlib.sha256(f"turn:{generation}:{secret}".encode()).digest()
    first, second = struct.unpack(">ii", digest[:8])
    return first, second


def _in_pg_locks(keys: tuple[int, int]) -> dict[str, int]:
    """The keys as pg_locks shows them (unsigned)."""
    return {"classid": keys[0] & 0xFFFF_FFFF, "objid": keys[1] & 0xFFFF_FFFF}


class TurnLock:
    """`machine`'s hold on the turn of chat `chat`, over a connection of its own opened by
    `connect` (a connection with the schema applied, as `connect.connect` makes).

    `try_take` takes the lock if no session holds it, and says the epoch of the turn it starts;
    `release` gives it back; `holder` names the machine that holds it. The connection is opened
    at the first call and kept, so that the lock lives as long as it does; `close` releases
    everything. Safe to call from several threads (the calls take turns).
    """

    def __init__(self, connect: ConnectionFactory, chat: int, machine: str) -> None:
        self.chat = chat
        self.machine = machine
        self._connect = connect
        self._keys = (0, 0)  # those of the lock this one took last
        self._conn: Connection | None = None
        self._held = False
        self._mutex = threading.Lock()
        self.epoch: int | None = None
        """The epoch of the turn this lock took last."""

    def try_take(self) -> int | None:
        """Take the turn if no session holds it: its epoch, one more than the last turn's of
        the chat; None when another session holds it. Never waits for it. The same epoch again
        while this lock holds it."""
        with self._mutex, driver_errors("take the chat's turn"):
            conn = self._connection()
            if self._held and self._holds(conn):
                return self.epoch
            self._held = False
            for _ in range(TRIES):
                keys, generation = self._current_keys(conn)
                taking = "SELECT pg_try_advisory_lock(%s::integer, %s::integer)"
                row = conn.execute(taking, keys).fetchone()
                if row is not None and row[0]:
                    epoch = self._start(conn, keys, generation)
                    if epoch is not None:
                        return epoch
                    continue  # the keys were moved meanwhile
                mine = conn.execute(_HOLDER_ROLE, _in_pg_locks(keys)).fetchone()
                if mine is not None and mine[0]:
                    return None  # another machine's turn runs
                if mine is not None:  # another role holds them: new keys
                    conn.execute(
                        "UPDATE evertalk.chats SET lock_gen = lock_gen + 1"
                        " WHERE id = %s AND lock_gen = %s",
                        (self.chat, generation),
                    )
            return None

    def _current_keys(self, conn: Connection) -> tuple[tuple[int, int], int]:
        """The keys of the chat's lock now, and their generation."""
        row = conn.execute(
            "SELECT secret, lock_gen FROM evertalk.chats WHERE id = %s", (self.chat,)
        ).fetchone()
        if row is None:
            raise PgStoreError("the chat is not in the database any more")
        return lock_keys(str(row[0]), int(row[1])), int(row[1])

    def _start(self, conn: Connection, keys: tuple[int, int], generation: int) -> int | None:
        """With the lock of `keys` taken: the turn's epoch, one more than the last; None, and
        the lock given back, when the chat's keys are not of `generation` any more (another
        session moved them from under another role's hold, and may hold the new ones)."""
        try:
            row = conn.execute(
                "UPDATE evertalk.chats SET turn_epoch = turn_epoch + 1"
                " WHERE id = %s AND lock_gen = %s RETURNING turn_epoch",
                (self.chat, generation),
            ).fetchone()
            if row is None:
                conn.execute("SELECT pg_advisory_unlock(%s::integer, %s::integer)", keys)
                return None
        except BaseException:
            self._drop_connection()  # the lock goes with it: no turn without an epoch
            raise
        self._keys, self._held, self.epoch = keys, True, int(row[0])
        return self.epoch

    def release(self) -> None:
        """Give the turn back (nothing if this lock does not hold it). Should the server not
        answer, the connection is closed: the lock goes with it."""
        with self._mutex:
            if not self._held or self._conn is None:
                return
            self._held = False
            try:
                self._conn.execute(
                    "SELECT pg_advisory_unlock(%s::integer, %s::integer)", self._keys
                )
            except psycopg.Error:
                self._drop_connection()

    def holder(self) -> str | None:
        """The machine whose turn runs now (this one's name when this lock holds it), or None
        when the turn is free. None too when the holding session wrote no row of its machine
        (it is not a `TurnLock`)."""
        reading = f"SELECT machine FROM evertalk.turns WHERE chat = %(chat)s AND pid = ({_HELD_BY})"
        with self._mutex, driver_errors("read the chat's turn"):
            conn = self._connection()
            keys, _ = self._current_keys(conn)
            row = conn.execute(reading, {"chat": self.chat, **_in_pg_locks(keys)}).fetchone()
        return str(row[0]) if row is not None else None

    def holding(self) -> bool:
        """Whether this lock holds the turn now, as the server sees it: False once its
        connection was lost (another machine may have taken the turn since)."""
        with self._mutex:
            if not self._held or self._conn is None:
                return False
            try:
                self._held = self._holds(self._conn)
            except psycopg.Error:
                self._drop_connection()
            return self._held

    def close(self) -> None:
        """Release the turn and close the lock's connection."""
        with self._mutex:
            self._drop_connection()

    def __enter__(self) -> TurnLock:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.close()

    def _holds(self, conn: Connection) -> bool:
        row = conn.execute(
            f"SELECT ({_HELD_BY}) IS NOT DISTINCT FROM pg_backend_pid()", _in_pg_locks(self._keys)
        ).fetchone()
        return row is not None and bool(row[0])

    def _connection(self) -> Connection:
        """The lock's connection, opened (and its machine's row written) when there is none or
        the last one broke (whatever it held is gone with it)."""
        if self._conn is not None and not self._conn.closed and not self._conn.broken:
            return self._conn
        self._drop_connection()
        conn = self._connect()
        try:
            conn.autocommit = True
            conn.execute(
                "SELECT set_config(name, value, false)"
                " FROM unnest(%s::text[], %s::text[]) AS wanted(name, value)"
                " WHERE name IN (SELECT name FROM pg_settings)",
                ([name for name, _ in SESSION], [value for _, value in SESSION]),
            )
            with conn.transaction():
                conn.execute(
                    "DELETE FROM evertalk.turns WHERE chat = %s"
                    " AND pid NOT IN (SELECT pid FROM pg_stat_activity)",
                    (self.chat,),
                )
                conn.execute(
                    "INSERT INTO evertalk.turns (chat, pid, machine)"
                    " VALUES (%s, pg_backend_pid(), %s)"
                    " ON CONFLICT (chat, pid) DO UPDATE SET machine = excluded.machine",
                    (self.chat, self.machine),
                )
        except BaseException:
            conn.close()
            raise
        self._conn = conn
        return conn

    def _drop_connection(self) -> None:
        self._held = False
        if self._conn is not None:
            conn, self._conn = self._conn, None
            conn.close()
