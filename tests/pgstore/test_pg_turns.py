"""One turn at a time per chat across machines.

The turn lock goes with its holder's connection: given back, or freed by the server when the
holder's process is killed. Each take of it starts a new epoch of the chat's turns, which the
appends of the turn carry (a stale one is refused: test_pg_appends.py).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable
from uuid import uuid4

import pytest

from evertalk.pgstore.connect import Connection
from evertalk.pgstore.errors import PgStoreError
from evertalk.pgstore.pgchat import PgChat
from evertalk.pgstore.turns import TurnLock, lock_keys
from pg_server import PgServer
from polling import wait_until

HOLDER = """
import os, sys
from evertalk.pgstore.connect import connect
from evertalk.pgstore.turns import TurnLock
lock = TurnLock(lambda: connect(os.environ["EVERTALK_TEST_PG"]), int(sys.argv[1]), "laptop")
print("taken" if lock.try_take() else "refused", flush=True)
sys.stdin.read()
"""
"""A machine that takes the turn, says so, and runs until it is killed."""


def chat_id(pg_connect: Callable[..., Connection]) -> int:
    return PgChat.open(pg_connect(), machine="home").chat


def test_one_machine_takes_the_turn_and_the_other_names_it(
    pg_connect: Callable[..., Connection],
) -> None:
    chat = chat_id(pg_connect)
    home, office = TurnLock(pg_connect, chat, "home"), TurnLock(pg_connect, chat, "office")
    assert office.holder() is None
    assert home.try_take() and home.holding()
    assert not office.try_take() and not office.holding()
    assert office.holder() == "home" and home.holder() == "home"
    assert home.try_take()  # taken already: taken once, so one release gives it back
    home.release()
    assert office.holder() is None and not home.holding()
    assert office.try_take()
    assert not home.try_take() and home.holder() == "office"
    office.release()
    office.release()  # nothing held: nothing done
    assert home.try_take()
    home.close()  # the lock goes with the connection, as soon as the server has seen it close
    wait_until(office.try_take, "the closed connection's turn freed", timeout=10)


def test_each_chat_has_its_own_turn(pg_connect: Callable[..., Connection]) -> None:
    conn = pg_connect()
    first = PgChat.open(conn, "first", machine="home").chat
    second = PgChat.open(conn, "second", machine="home").chat
    assert TurnLock(pg_connect, first, "home").try_take()
    assert TurnLock(pg_connect, second, "office").try_take()
    assert TurnLock(pg_connect, second, "home").holder() == "office"


def test_lock_keys_are_drawn_from_the_chats_secret() -> None:
    keys = [lock_keys(secret, n) for secret in ("a" * 32, "b" * 32) for n in range(3)]
    assert len(set(keys)) == len(keys)
    assert all(-(2**31) <= key < 2**31 for pair in keys for key in pair)
    assert lock_keys("a" * 32, 1) == keys[1]


def test_a_killed_holder_frees_the_turn(pg_url: str, pg_connect: Callable[..., Connection]) -> None:
    chat = chat_id(pg_connect)
    office = TurnLock(pg_connect, chat, "office")
    laptop = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(chat)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
        env={**os.environ, "EVERTALK_TEST_PG": pg_url},
    )
    try:
        assert laptop.stdout is not None
        assert laptop.stdout.readline() == "taken\n"
        assert office.holder() == "laptop" and not office.try_take()
    finally:
        laptop.send_signal(signal.SIGKILL)
        laptop.communicate()
    assert laptop.returncode == -signal.SIGKILL
    wait_until(office.try_take, "the killed machine's turn freed", timeout=10)
    assert office.holder() == "office"
    machines = pg_connect().execute("SELECT machine FROM evertalk.turns ORDER BY machine")
    assert [row[0] for row in machines] == ["laptop", "office"]  # the dead row is not believed
    TurnLock(pg_connect, chat, "home").holder()  # a new session clears the dead one's row
    machines = pg_connect().execute("SELECT machine FROM evertalk.turns ORDER BY machine")
    assert [row[0] for row in machines] == ["home", "office"]


def test_a_lost_connection_loses_the_turn(pg_connect: Callable[..., Connection]) -> None:
    chat = chat_id(pg_connect)
    home, office = TurnLock(pg_connect, chat, "home"), TurnLock(pg_connect, chat, "office")
    assert home.try_take()
    pg_connect().execute(
        "SELECT pg_terminate_backend(pid, 10000) FROM evertalk.turns WHERE machine = 'home'"
    )
    assert not home.holding()
    wait_until(office.try_take, "the lost connection's turn freed", timeout=10)
    assert not home.try_take() and home.holder() == "office"  # on a new connection


def epoch_of(conn: Connection, chat: int) -> int:
    row = conn.execute("SELECT turn_epoch FROM evertalk.chats WHERE id = %s", (chat,)).fetchone()
    assert row is not None
    return int(row[0])


def test_each_take_of_the_turn_is_a_new_epoch(pg_connect: Callable[..., Connection]) -> None:
    chat = chat_id(pg_connect)
    home, office = TurnLock(pg_connect, chat, "home"), TurnLock(pg_connect, chat, "office")
    assert epoch_of(pg_connect(), chat) == 0
    assert home.try_take() == 1
    assert home.try_take() == 1  # held already: the same turn
    assert office.try_take() is None and epoch_of(pg_connect(), chat) == 1
    home.release()
    assert office.try_take() == 2
    office.close()
    wait_until(lambda: home.try_take() is not None, "the closed connection's turn freed", 10)
    assert home.epoch == 3 == epoch_of(pg_connect(), chat)


def test_another_role_neither_sees_nor_takes_the_turn(
    pg_server: PgServer, pg_url: str, pg_connect: Callable[..., Connection]
) -> None:
    pg_connect()  # the administrator creates the schema
    database = pg_url.rpartition("/")[2]
    ann, bob = (f"{name}_{uuid4().hex[:8]}" for name in ("ann", "bob"))
    for role in (ann, bob):
        pg_server.create_role(role)
    ann_url, bob_url = pg_server.url(database, ann), pg_server.url(database, bob)
    ann_conn = pg_connect(ann_url)
    chat = PgChat.open(ann_conn, machine="home").chat
    ann_turn = TurnLock(lambda: pg_connect(ann_url), chat, "home")
    assert ann_turn.try_take() == 1

    bob_conn = pg_connect(bob_url)
    for table in ("chats", "turns"):
        assert bob_conn.execute(f"SELECT count(*) FROM evertalk.{table}").fetchone() == (0,)
    bob_turn = TurnLock(lambda: pg_connect(bob_url), chat, "x")
    with pytest.raises(PgStoreError, match="row-level security"):
        bob_turn.holder()
    with pytest.raises(PgStoreError, match="row-level security"):
        bob_turn.try_take()
    assert ann_turn.holding() and ann_turn.holder() == "home"
    assert epoch_of(ann_conn, chat) == 1

    # pg_locks shows every role the keys of the locks held: bob reads those of ann's turn,
    # and holds them once she gives it back
    seen = bob_conn.execute(
        "SELECT l.classid::bigint, l.objid::bigint FROM pg_locks AS l"
        " JOIN pg_stat_activity AS a ON a.pid = l.pid"
        " WHERE l.locktype = 'advisory' AND l.granted AND a.usename = %s",
        (ann,),
    ).fetchall()
    assert len(seen) == 1
    keys = [key - (1 << 32) if key >= 1 << 31 else key for key in seen[0]]
    ann_turn.release()
    taking = "SELECT pg_try_advisory_lock(%s::integer, %s::integer)"
    assert bob_conn.execute(taking, keys).fetchone() == (True,)
    office = TurnLock(lambda: pg_connect(ann_url), chat, "office")
    assert office.holder() is None  # no session of ann's holds it
    assert ann_turn.try_take() == 2  # bob blocks nothing
    assert office.try_take() is None and office.holder() == "home"
    ann_turn.release()
    assert office.try_take() == 3
