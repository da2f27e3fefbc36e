"""A chat's row: found or created, locked for a change, and its sequence number bumped.

Every change to the shared state holds the chat's row lock until its commit, and ends by
recording the change (the schema's `evertalk.record_change`): the sequence number goes up by
one, the change is written to the feed the other machines fold in, and they are woken by a
NOTIFY on the chat's channel (delivered at the commit, never before). An append, a build and a
cut are one call each of the schema's functions, which do all of it on the server: one round
trip, however far the database is. The rarer changes (a transfer's nodes, a lease's claim) run
inside `changing`, and end with `record_change`.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from evertalk.pgstore.connect import Connection
from evertalk.pgstore.errors import PgStoreError


@dataclass(frozen=True, slots=True)
class Locked:
    """The chat's row as the lock found it."""

    count: int
    seq: int


@dataclass(frozen=True, slots=True)
class Change:
    """A change to the shared state, as the feed holds it."""

    seq: int
    machine: str
    what: dict[str, Any]


def channel(secret: str) -> str:
    """The NOTIFY channel of the chat of this secret, as `evertalk.chat_channel` names it
    (schema.py): a role that cannot read the secret cannot name the channel to listen on."""
    digest = hashlib.sha256(f"channel:{secret}".encode()).hexdigest()
    return f"evertalk_{digest[:32]}"


def chat_secret(conn: Connection, chat: int) -> str:
    """The chat's secret, which only its role can read."""
    row = conn.execute("SELECT secret FROM evertalk.chats WHERE id = %s", (chat,)).fetchone()
    if row is None:
        raise PgStoreError("the chat is not in the database any more")
    return str(row[0])


def find_chat(conn: Connection, name: str, *, create: bool) -> int | None:
    """The id of this role's chat `name`; created if missing and `create`."""
    if create:
        conn.execute(
            "INSERT INTO evertalk.chats (name) VALUES (%s) ON CONFLICT (owner, name) DO NOTHING",
            (name,),
        )
    row = conn.execute(
        "SELECT id FROM evertalk.chats WHERE name = %s AND owner = current_user", (name,)
    ).fetchone()
    return int(row[0]) if row is not None else None


@contextmanager
def changing(conn: Connection, chat: int) -> Iterator[Locked]:
    """A transaction holding the chat's row lock: the changes of other machines wait for it."""
    with conn.transaction():
        row = conn.execute(
            "SELECT count, seq FROM evertalk.chats WHERE id = %s FOR UPDATE", (chat,)
        ).fetchone()
        if row is None:
            raise PgStoreError("the chat is not in the database any more")
        yield Locked(int(row[0]), int(row[1]))


def record_change(
    conn: Connection, chat: int, machine: str, what: dict[str, Any], count: int
) -> int:
    """Inside `changing`: set T to `count`, bump the sequence number, write the change to the
    feed and notify the chat's channel; the new sequence number."""
    row = conn.execute(
        "SELECT evertalk.record_change(%s::bigint, %s::text, %s::jsonb, %s::bigint)",
        (chat, machine, json.dumps(what), count),
    ).fetchone()
    assert row is not None and row[0] is not None  # the row is locked by this transaction
    return int(row[0])


def chat_numbers(conn: Connection, chat: int) -> tuple[int, int, int]:
    """T, the sequence number and the count of refused builds, as committed now."""
    row = conn.execute(
        "SELECT count, seq, refused FROM evertalk.chats WHERE id = %s", (chat,)
    ).fetchone()
    if row is None:
        raise PgStoreError("the chat is not in the database any more")
    return int(row[0]), int(row[1]), int(row[2])


def changes_since(conn: Connection, chat: int, seq: int) -> list[Change]:
    """The changes after sequence number `seq`, in order."""
    rows = conn.execute(
        "SELECT seq, machine, what FROM evertalk.changes WHERE chat = %s AND seq > %s ORDER BY seq",
        (chat, seq),
    ).fetchall()
    return [Change(int(row[0]), str(row[1]), dict(row[2])) for row in rows]
