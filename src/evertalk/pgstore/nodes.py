"""The rows of the nodes table: a node's row is unique, so a second build of it is refused."""

from __future__ import annotations

import sys
from array import array
from collections.abc import Sequence
from dataclasses import dataclass

from evertalk.pgstore.connect import Connection
from evertalk.pgstore.errors import PgStoreError
from evertalk.pgstore.nul import read, stored
from evertalk.store.index_files import SIZE_CODE
from evertalk.store.records import NodeRecord, encode_node

NodeRow = tuple[int, int, str, int]
"""(l, i, text, flag): flag 1 built by a model, 2 free, 3 cut."""

CHUNK = 256
"""Nodes to a row of the shape table (schema.py's `shape_set`)."""

LARGEST = 2**63 - 1
"""The largest bigint: no chat's T is larger."""


def check_node(node: NodeRow, count: int) -> None:
    """ValueError unless the node exists in a chat of `count` messages and its record is valid."""
    l, i, text, flag = node  # noqa: E741 - the spec's name for a level
    if l < 0 or i < 0 or l > 62 or (i + 1) << l > count:
        raise ValueError(f"node ({l}, {i}) does not exist yet")
    encode_node(l, i, text, flag)  # the checks of a tree line: the text's size, the flag


def put_node(conn: Connection, chat: int, machine: str, rows: Sequence[NodeRow]) -> int | None:
    """Store the node rows[0] with the free parents rows[1:] it completes, in one statement
    (evertalk.put_node, schema.py): its own transaction, under the chat's row lock; the
    change's sequence number. None, and one more build refused, when the node was built
    already, unless by this machine's change with the same text and flag (the same call sent
    again after its reply was lost): then that change's number; nothing is written. The
    nodes' existence is checked against T under the lock (ValueError as `check_node`'s)."""
    for node in rows:
        check_node(node, LARGEST)  # what the chat's T cannot change
    needed = max((i + 1) << l for l, i, _, _ in rows)  # noqa: E741
    row = conn.execute(
        "SELECT t, stored, seq FROM evertalk.put_node(%s::bigint, %s::text, %s::bigint,"
        " %s::smallint[], %s::bigint[], %s::text[], %s::smallint[])",
        (
            chat,
            machine,
            needed,
            [node[0] for node in rows],
            [node[1] for node in rows],
            [stored(node[2]) for node in rows],
            [node[3] for node in rows],
        ),
        prepare=False,  # preparing it would cost a round trip of its own, once
    ).fetchone()
    if row is None or row[0] is None:
        raise PgStoreError("the chat is not in the database any more")
    if row[1] is None:  # a node past the chat's T: nothing was done
        for node in rows:
            check_node(node, int(row[0]))
    return int(row[2]) if row[1] else None


def count_failure(conn: Connection, chat: int, l: int, i: int) -> int:  # noqa: E741
    """Count one more failure of node (l, i) for the chat; the count now."""
    row = conn.execute(
        "INSERT INTO evertalk.failures AS f (chat, l, i, count) VALUES (%s, %s, %s, 1)"
        " ON CONFLICT (chat, l, i) DO UPDATE SET count = f.count + 1 RETURNING f.count",
        (chat, l, i),
    ).fetchone()
    if row is None:
        raise PgStoreError("the chat is not in the database any more")
    return int(row[0])


def insert_nodes(conn: Connection, chat: int, nodes: Sequence[NodeRow]) -> list[tuple[int, int]]:
    """Write the nodes that are not built yet; the (l, i) of those written."""
    rows = conn.execute(
        "INSERT INTO evertalk.nodes (chat, l, i, text, flag)"
        " SELECT %s, l, i, text, flag"
        " FROM unnest(%s::smallint[], %s::bigint[], %s::text[], %s::smallint[])"
        " AS n(l, i, text, flag)"
        " ON CONFLICT (chat, l, i) DO NOTHING RETURNING l, i",
        (
            chat,
            [node[0] for node in nodes],
            [node[1] for node in nodes],
            [stored(node[2]) for node in nodes],
            [node[3] for node in nodes],
        ),
    ).fetchall()
    return [(int(row[0]), int(row[1])) for row in rows]


def _record(row: tuple[int, int, str, int]) -> NodeRecord:
    l, i, stored_text, flag = row  # noqa: E741
    text = read(stored_text)
    return NodeRecord(int(l), int(i), text, len(text.encode("utf-8")), int(flag))


def read_node(conn: Connection, chat: int, l: int, i: int) -> NodeRecord | None:  # noqa: E741
    row = conn.execute(
        "SELECT l, i, text, flag FROM evertalk.nodes WHERE chat = %s AND l = %s AND i = %s",
        (chat, l, i),
    ).fetchone()
    return _record(row) if row is not None else None


def read_node_list(
    conn: Connection, chat: int, wanted: Sequence[tuple[int, int]]
) -> list[NodeRecord]:
    """The nodes of `wanted` that are built, in one query, in no given order."""
    if not wanted:
        return []
    rows = conn.execute(
        "SELECT n.l, n.i, n.text, n.flag FROM evertalk.nodes AS n"
        " JOIN unnest(%s::smallint[], %s::bigint[]) AS w(l, i) ON n.l = w.l AND n.i = w.i"
        " WHERE n.chat = %s",
        ([node[0] for node in wanted], [node[1] for node in wanted], chat),
    ).fetchall()
    return [_record(row) for row in rows]


def read_nodes(conn: Connection, chat: int, after: tuple[int, int], limit: int) -> list[NodeRecord]:
    """Up to `limit` nodes past (l, i) `after`, in order of level, then index."""
    rows = conn.execute(
        "SELECT l, i, text, flag FROM evertalk.nodes WHERE chat = %s AND (l, i) > (%s, %s)"
        " ORDER BY l, i LIMIT %s",
        (chat, after[0], after[1], limit),
    ).fetchall()
    return [_record(row) for row in rows]


def built_nodes(conn: Connection, chat: int) -> set[tuple[int, int]]:
    """The (l, i) of every node built."""
    rows = conn.execute("SELECT l, i FROM evertalk.nodes WHERE chat = %s", (chat,)).fetchall()
    return {(int(row[0]), int(row[1])) for row in rows}


@dataclass(frozen=True)
class NodeShape:
    """Every built node's size (bytes of its text) and flag, per level: what the memory core
    opens with (as the file store's index holds them)."""

    sizes: list[array[int]]
    flags: list[bytearray]


def node_shape(conn: Connection, chat: int, t: int) -> NodeShape:
    """The built nodes' sizes and flags, read from the shape table (256 nodes to a row, kept
    by the schema's trigger as nodes are stored); `t`, read in the same snapshot, says how long
    each level is."""
    levels = t.bit_length()
    sizes = [array(SIZE_CODE, bytes(4 * (t >> level))) for level in range(levels)]
    flags = [bytearray(t >> level) for level in range(levels)]
    swap = sys.byteorder == "little"  # the table's sizes are big-endian
    with conn.cursor() as cursor:
        cursor.execute("SELECT l, chunk, flags, sizes FROM evertalk.shape WHERE chat = %s", (chat,))
        for l, chunk, chunk_flags, chunk_sizes in cursor:  # noqa: E741
            if l >= levels:
                continue
            start = chunk * CHUNK
            count = min(CHUNK, len(flags[l]) - start)
            if count <= 0:
                continue
            flags[l][start : start + count] = bytes(chunk_flags)[:count]
            part = array(SIZE_CODE, bytes(chunk_sizes)[: 4 * count])
            if swap:
                part.byteswap()
            sizes[l][start : start + count] = part
    return NodeShape(sizes, flags)
