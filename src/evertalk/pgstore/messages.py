"""The rows of the messages table, to and from `MessageRecord`s."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from evertalk.pgstore.connect import Connection
from evertalk.pgstore.errors import PgStoreError
from evertalk.pgstore.nul import read, read_or_none, stored, stored_or_none
from evertalk.store.records import MessageRecord, Page

_COLUMNS = "id, kind, date, text, images, key, agent, failed, part, parts"


@dataclass(frozen=True)
class Logged:
    """What an append did: T as the lock found it, the messages' ids (None: not logged), the
    change's sequence number (None: no change, as for a key logged before), and whether it was
    refused as a stale turn's."""

    count: int
    ids: list[int] | None
    seq: int | None
    stale: bool = False


def log_messages(
    conn: Connection,
    chat: int,
    machine: str,
    records: Sequence[MessageRecord],
    *,
    key: str | None = None,
    numbered: bool = False,
    leaves: Sequence[str | None] = (),
    epoch: int | None = None,
) -> Logged:
    """Log the records as the chat's next messages and record the change, in one statement
    (evertalk.log_messages, schema.py): its own transaction, under the chat's row lock, unless
    the caller holds one open. (T as the lock found it, the messages' ids.)

    With `key`, a message logged under it already (on one page or several) is not logged
    again: its ids are returned. The records' ids are the chat's next ones, unless `numbered`:
    then they are kept, and nothing is logged (ids None) unless they follow the chat's T.
    `leaves`: per record, its leaf's text when that is free (the message is its own line),
    stored with it, or None. `epoch`: the turn's that logs them, if a turn does; nothing is
    logged (stale) when another session has taken the chat's turn since, unless the key was
    logged already."""
    images = [json.dumps(list(r.images)) if r.images is not None else None for r in records]
    row = conn.execute(
        "SELECT t, first_id, pages, seq, stale FROM evertalk.log_messages(%s::bigint, %s::text,"
        " %s::text[], %s::bigint[], %s::text[], %s::text[], %s::text[], %s::text[], %s::text[],"
        " %s::text[],"
        " %s::boolean[], %s::integer[], %s::integer[], %s::text[], %s::bigint)",
        (
            chat,
            machine,
            [stored(key), stored(f"{key}.0")] if key is not None else None,
            [r.i for r in records] if numbered else None,
            [r.kind for r in records],
            [r.date for r in records],
            [stored(r.text) for r in records],
            images,
            [stored_or_none(r.key) for r in records],
            [stored_or_none(r.agent) for r in records],
            [r.failed for r in records],
            [r.page.part if r.page is not None else None for r in records],
            [r.page.parts if r.page is not None else None for r in records],
            [stored_or_none(leaf) for leaf in leaves] if leaves else None,
            epoch,
        ),
        prepare=False,  # preparing it would cost a round trip of its own, once
    ).fetchone()
    if row is None or row[0] is None:
        raise PgStoreError("the chat is not in the database any more")
    count, first, pages = int(row[0]), row[1], row[2]
    ids = list(range(first, first + pages)) if first is not None else None
    return Logged(count, ids, int(row[3]) if row[3] is not None else None, bool(row[4]))


def _record(row: tuple[Any, ...]) -> MessageRecord:
    i, kind, date, text, images, key, agent, failed, part, parts = row
    text = read(text)
    return MessageRecord(
        int(i),
        kind,
        text,
        len(text.encode("utf-8")),
        date,
        key=read_or_none(key),
        images=tuple(images) if images is not None else None,
        agent=read_or_none(agent),
        page=Page(part, parts) if part is not None else None,
        failed=bool(failed),
    )


def read_messages(conn: Connection, chat: int, start: int, stop: int) -> list[MessageRecord]:
    """Messages start … stop - 1 that are logged, in order."""
    rows = conn.execute(
        f"SELECT {_COLUMNS} FROM evertalk.messages WHERE chat = %s AND id >= %s AND id < %s"
        " ORDER BY id",
        (chat, start, stop),
    ).fetchall()
    return [_record(row) for row in rows]


def logged_ids(conn: Connection, chat: int, key: str) -> list[int] | None:
    """The ids of the message logged with `key`, whether on one page or several (`key.0`, …)."""
    row = conn.execute(
        "SELECT id, parts FROM evertalk.messages WHERE chat = %s AND key IN (%s, %s)"
        " ORDER BY id LIMIT 1",
        (chat, stored(key), stored(f"{key}.0")),
    ).fetchone()
    if row is None:
        return None
    first, parts = int(row[0]), row[1]
    return list(range(first, first + (parts if parts is not None else 1)))
