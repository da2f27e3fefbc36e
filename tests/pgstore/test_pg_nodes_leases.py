"""Builds and cuts: a node's row is unique. Leases: one machine per node, 8 live per chat."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from evertalk.memory.tree import BUILT, CUT, FREE
from evertalk.pgstore.connect import Connection
from evertalk.pgstore.leases import LEASE_LIMIT
from evertalk.pgstore.pgchat import PgChat
from evertalk.store.records import NodeRecord


def chat_of(pg_connect: Callable[..., Connection], machine: str, messages: int = 0) -> PgChat:
    chat = PgChat.open(pg_connect(), machine=machine)
    for n in range(messages):
        chat.append_message("user", f"message {n}")
    return chat


def expire_all(conn: Connection) -> None:
    """As if the machines holding the leases had died: their time is up."""
    conn.execute("UPDATE evertalk.leases SET expires = now() - interval '1 second'")


def test_a_node_built_twice_is_refused_and_counted(pg_connect: Callable[..., Connection]) -> None:
    home = chat_of(pg_connect, "home", messages=4)
    office = chat_of(pg_connect, "office")
    assert home.build(1, 0, "first summary", free=[(2, 0, "free parent", FREE)])
    assert not office.build(1, 0, "second summary")
    assert not home.cut(1, 0, "a cut")
    assert office.read_node(1, 0) == NodeRecord(1, 0, "first summary", 13, BUILT)
    assert office.read_node(2, 0) == NodeRecord(2, 0, "free parent", 11, FREE)
    assert home.refused == 2
    assert [c.what for c in office.changes_since(4)] == [{"nodes": [[1, 0], [2, 0]]}]


def test_a_build_sent_again_after_its_reply_was_lost_is_done(
    pg_connect: Callable[..., Connection],
) -> None:
    home = chat_of(pg_connect, "home", messages=2)
    office = chat_of(pg_connect, "office")
    seq = home.put_built(0, 0, "a line", BUILT)
    assert seq == 3
    # the session sends the same call again when the connection fell before the reply came
    assert home.put_built(0, 0, "a line", BUILT) == seq
    assert home.refused == 0
    assert office.put_built(0, 0, "a line", BUILT) is None  # another machine's build
    assert home.put_built(0, 0, "another line", BUILT) is None
    assert home.put_built(0, 0, "a line", CUT) is None
    assert home.refused == 3
    assert [c.what for c in home.changes_since(2)] == [{"nodes": [[0, 0]]}]


def test_a_cut_node(pg_connect: Callable[..., Connection]) -> None:
    chat = chat_of(pg_connect, "home", messages=2)
    assert chat.cut(0, 1, "cut input")
    record = chat.read_node(0, 1)
    assert record is not None and record.flag == CUT
    assert chat.read_node(0, 0) is None and chat.node_count == 1


def test_only_nodes_that_exist(pg_connect: Callable[..., Connection]) -> None:
    chat = chat_of(pg_connect, "home", messages=3)
    with pytest.raises(ValueError, match=r"node \(2, 0\) does not exist yet"):
        chat.build(2, 0, "too soon")
    with pytest.raises(ValueError, match="at most 512 bytes"):
        chat.build(0, 0, "x" * 600)
    assert chat.seq == 3 and chat.node_count == 0


def test_a_live_lease_keeps_other_machines_off(pg_connect: Callable[..., Connection]) -> None:
    home = chat_of(pg_connect, "home", messages=2)
    office = chat_of(pg_connect, "office")
    assert home.claim(0, 0, 60)
    assert not office.claim(0, 0, 60)
    assert home.claim(0, 0, 60)  # renewed by its holder
    assert office.claim(0, 1, 60)
    assert [(lease.l, lease.i, lease.machine) for lease in home.live_leases()] == [
        (0, 0, "home"),
        (0, 1, "office"),
    ]
    assert not office.release(0, 0) and home.release(0, 0)
    assert office.claim(0, 0, 60)


def test_at_most_eight_live_leases_per_chat(pg_connect: Callable[..., Connection]) -> None:
    home = chat_of(pg_connect, "home", messages=12)
    office = chat_of(pg_connect, "office")
    taken = [home.claim(0, i, 60) for i in range(5)] + [
        office.claim(0, i, 60) for i in range(5, 12)
    ]
    assert taken == [True] * LEASE_LIMIT + [False] * (12 - LEASE_LIMIT)
    assert len(home.live_leases()) == LEASE_LIMIT
    assert home.build(0, 0, "done")  # a build ends its lease: room for one more
    assert office.claim(0, 8, 60) and not office.claim(0, 9, 60)


def test_expired_leases_are_taken_by_another_machine(
    pg_connect: Callable[..., Connection],
) -> None:
    home = chat_of(pg_connect, "home", messages=10)
    office = chat_of(pg_connect, "office")
    assert all(home.claim(0, i, 60) for i in range(LEASE_LIMIT))
    assert not office.claim(0, 0, 60) and not office.claim(0, 9, 60)
    expire_all(pg_connect())
    assert home.live_leases() == []
    assert [(lease.i, lease.machine) for lease in office.expired_leases()][:2] == [
        (0, "home"),
        (1, "home"),
    ]
    assert office.claim(0, 0, 60) and office.claim(0, 9, 60)
    assert [(lease.i, lease.machine) for lease in home.live_leases()] == [
        (0, "office"),
        (9, "office"),
    ]


def test_no_lease_on_a_built_node(pg_connect: Callable[..., Connection]) -> None:
    chat = chat_of(pg_connect, "home", messages=1)
    assert chat.build(0, 0, "built")
    assert not chat.claim(0, 0, 60)
    with pytest.raises(ValueError, match="positive"):
        chat.claim(0, 0, 0)
