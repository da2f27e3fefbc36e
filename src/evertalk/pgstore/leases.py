"""Compaction leases (SPEC §13): a machine claims a node before building it.

A live lease keeps other machines off its node; one whose machine died expires, and another
machine may take it. At most LEASE_LIMIT leases are live per chat: the limit of builds in
flight holds across machines. Claims run under the chat's row lock, so that two machines
counting the live leases at once cannot both take the eighth. A build ends its node's lease,
whoever held it (in the same statement, `evertalk.put_node` of schema.py). Times are the
server's, so that the machines' clocks need not agree.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from evertalk.pgstore.connect import Connection

LEASE_LIMIT = 8


@dataclass(frozen=True, slots=True)
class Lease:
    l: int  # noqa: E741 - the spec's name for a level
    i: int
    machine: str
    expires: datetime


def _holder(conn: Connection, chat: int, l: int, i: int) -> str | None:  # noqa: E741
    """The machine holding a live lease on (l, i), if any."""
    row = conn.execute(
        "SELECT machine FROM evertalk.leases"
        " WHERE chat = %s AND l = %s AND i = %s AND expires > now()",
        (chat, l, i),
    ).fetchone()
    return str(row[0]) if row is not None else None


def _live_elsewhere(conn: Connection, chat: int, l: int, i: int) -> int:  # noqa: E741
    """How many live leases the chat has on nodes other than (l, i)."""
    row = conn.execute(
        "SELECT count(*) FROM evertalk.leases"
        " WHERE chat = %s AND expires > now() AND (l, i) <> (%s, %s)",
        (chat, l, i),
    ).fetchone()
    return int(row[0]) if row is not None else 0


def _built(conn: Connection, chat: int, l: int, i: int) -> bool:  # noqa: E741
    row = conn.execute(
        "SELECT 1 FROM evertalk.nodes WHERE chat = %s AND l = %s AND i = %s", (chat, l, i)
    ).fetchone()
    return row is not None


def claim_lease(
    conn: Connection,
    chat: int,
    node: tuple[int, int],
    machine: str,
    seconds: float,
    limit: int = LEASE_LIMIT,
) -> bool:
    """Inside the chat's row lock: take (or renew, for its holder) the lease on `node` for
    `seconds`; False when another machine holds it live, the chat has `limit` live leases, or
    the node is built."""
    l, i = node  # noqa: E741
    holder = _holder(conn, chat, l, i)
    if holder is not None and holder != machine:
        return False
    if _live_elsewhere(conn, chat, l, i) >= limit or _built(conn, chat, l, i):
        return False
    conn.execute(
        "INSERT INTO evertalk.leases (chat, l, i, machine, expires)"
        " VALUES (%s, %s, %s, %s, now() + make_interval(secs => %s))"
        " ON CONFLICT (chat, l, i) DO UPDATE SET machine = excluded.machine,"
        " expires = excluded.expires",
        (chat, l, i, machine, seconds),
    )
    return True


def release_lease(conn: Connection, chat: int, node: tuple[int, int], machine: str) -> bool:
    """Give up `machine`'s lease on `node`; whether it held one."""
    done = conn.execute(
        "DELETE FROM evertalk.leases WHERE chat = %s AND l = %s AND i = %s AND machine = %s",
        (chat, node[0], node[1], machine),
    )
    return done.rowcount > 0


def leases(conn: Connection, chat: int, *, live: bool) -> list[Lease]:
    """The chat's live leases, or its expired ones (left by machines that died mid-call)."""
    test = "expires > now()" if live else "expires <= now()"
    rows = conn.execute(
        f"SELECT l, i, machine, expires FROM evertalk.leases WHERE chat = %s AND {test}"
        " ORDER BY l, i",
        (chat,),
    ).fetchall()
    return [Lease(int(row[0]), int(row[1]), str(row[2]), row[3]) for row in rows]
