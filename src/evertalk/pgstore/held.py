"""Held messages in the database: accepted while a turn runs, before the log has them (SPEC §6.4).

The database's `chat/held.jsonl`. A message accepted during a turn is held here, committed
synchronously, before its client is told it is accepted; it is dropped once the log has it. A
held row belongs to the machine that accepted it: that machine's service gives it to its turn
(the images it names are in that machine's `chat/images/`). Each row keeps the message's key,
which is how a message already logged, or already held (by this machine or another), is told
from a new one: neither is held twice.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import Any

from psycopg.pq import TransactionStatus

from evertalk.pgstore import messages
from evertalk.pgstore.connect import Connection, driver_errors
from evertalk.pgstore.errors import PgStoreError
from evertalk.pgstore.nul import read, read_or_none, stored, stored_or_none
from evertalk.store.held import HeldEntry

HELD_KINDS = ("user", "work")
"""The kinds of message a turn takes (as the held file's entries)."""


def hold(
    conn: Connection,
    chat: int,
    machine: str,
    key: str,
    kind: str,
    text: str,
    date: str,
    images: Sequence[str] = (),
    *,
    workdir: str | None = None,
    agent: str | None = None,
    model: str | None = None,
    quiet: bool = False,
) -> bool:
    """Hold a message for `machine`'s next turn step or turn; durable once this returns (the
    commit waits for the server's fsync). False, holding nothing, when a message with this key
    is held already (by any machine) or logged. `conn` is outside a transaction, so that the
    commit is this call's own."""
    if kind not in HELD_KINDS:
        raise ValueError(f"a held message is of kind 'user' or 'work', not {kind!r}")
    if not key:
        raise ValueError("a held message has a key")
    if conn.info.transaction_status != TransactionStatus.IDLE:
        raise ValueError("a message is held outside a transaction: its commit must be its own")
    names = list(images)
    if not all(isinstance(name, str) for name in names):
        raise ValueError("a held message's images are names")
    with driver_errors("keep the message"), conn.transaction():
        conn.execute("SET LOCAL synchronous_commit = on")
        # Appends hold the chat's row for update: a message logged under that lock is seen
        # logged here, not held again after its own held row was dropped.
        found = conn.execute(
            "SELECT 1 FROM evertalk.chats WHERE id = %s FOR SHARE", (chat,)
        ).fetchone()
        if found is None:
            raise PgStoreError("cannot keep the message: the chat is not in the database any more")
        if messages.logged_ids(conn, chat, key) is not None:
            return False
        done = conn.execute(
            "INSERT INTO evertalk.held"
            " (chat, key, machine, kind, text, date, images, workdir, agent, model, quiet)"
            " VALUES (%s, %s, %s, %s, %s, %s, %s::jsonb, %s, %s, %s, %s)"
            " ON CONFLICT (chat, key) DO NOTHING",
            (
                chat,
                stored(key),
                machine,
                kind,
                stored(text),
                date,
                json.dumps(names) if names else None,
                stored_or_none(workdir),
                stored_or_none(agent),
                stored_or_none(model),
                quiet,
            ),
        )
        return done.rowcount == 1


def held_for(conn: Connection, chat: int, machine: str) -> list[HeldEntry]:
    """The messages `machine` holds that the log lacks, oldest first. A row whose message was
    logged but not dropped yet (the machine stopped in between) is not given again."""
    with driver_errors("read the held messages"):
        rows = conn.execute(
            "SELECT key, kind, text, date, images, workdir, agent, model, quiet"
            " FROM evertalk.held AS h WHERE chat = %s AND machine = %s AND NOT EXISTS"
            " (SELECT 1 FROM evertalk.messages AS m"
            " WHERE m.chat = h.chat AND m.key IN (h.key, h.key || '.0'))"
            " ORDER BY n",
            (chat, machine),
        ).fetchall()
    return [_entry(row) for row in rows]


def drop(conn: Connection, chat: int, keys: Iterable[str]) -> int:
    """Forget the held messages with these keys (the log has them now); how many there were."""
    wanted = [stored(key) for key in keys]
    if not wanted:
        return 0
    with driver_errors("drop the held messages"):
        done = conn.execute(
            "DELETE FROM evertalk.held WHERE chat = %s AND key = ANY(%s)", (chat, wanted)
        )
    return done.rowcount


def _entry(row: tuple[Any, ...]) -> HeldEntry:
    key, kind, text, date, images, workdir, agent, model, quiet = row
    return HeldEntry(
        read(key),
        "user" if kind == "user" else "work",
        read(text),
        date,
        tuple(images) if images is not None else (),
        workdir=read_or_none(workdir),
        agent=read_or_none(agent),
        model=read_or_none(model),
        quiet=bool(quiet),
    )
