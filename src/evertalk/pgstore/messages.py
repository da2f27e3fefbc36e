"""The rows of the messages table, to and from `MessageRecord`s."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from evertalk.pgstore.connect import Connection
from evertalk.pgstore.nul import read, read_or_none, stored, stored_or_none
from evertalk.store.records import MessageRecord, Page

_COLUMNS = "id, kind, date, text, images, key, agent, failed, part, parts"


def insert_messages(conn: Connection, chat: int, records: Sequence[MessageRecord]) -> None:
    """Write the records as rows in one statement (their ids are the caller's to check)."""
    images = [json.dumps(list(r.images)) if r.images is not None else None for r in records]
    conn.execute(
        f"INSERT INTO evertalk.messages (chat, {_COLUMNS})"
        " SELECT %s, id, kind, date, text, images::jsonb, key, agent, failed, part, parts"
        " FROM unnest(%s::bigint[], %s::text[], %s::text[], %s::text[], %s::text[],"
        " %s::text[], %s::text[], %s::boolean[], %s::integer[], %s::integer[])"
        " AS m(id, kind, date, text, images, key, agent, failed, part, parts)",
        (
            chat,
            [r.i for r in records],
            [r.kind for r in records],
            [r.date for r in records],
            [stored(r.text) for r in records],
            images,
            [stored_or_none(r.key) for r in records],
            [stored_or_none(r.agent) for r in records],
            [r.failed for r in records],
            [r.page.part if r.page is not None else None for r in records],
            [r.page.parts if r.page is not None else None for r in records],
        ),
    )


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
