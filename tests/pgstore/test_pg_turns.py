"""One turn at a time per chat across machines, and the messages held meanwhile.

The turn lock goes with its holder's connection: given back, or freed by the server when the
holder's process is killed. A held message is committed before `hold` returns, kept in order
for the machine that accepted it, never held twice, and seen by its owner's role only.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import Callable
from uuid import uuid4

import pytest

from evertalk.pgstore import held
from evertalk.pgstore.connect import Connection
from evertalk.pgstore.errors import PgStoreError
from evertalk.pgstore.pgchat import PgChat
from evertalk.pgstore.turns import TURN_LOCKS, TurnLock, lock_keys
from evertalk.store.held import HeldEntry
from pg_server import PgServer
from polling import wait_until

DATE = "2026-03-01T09:30:00+01:00"

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


def test_lock_keys_are_one_pair_per_chat() -> None:
    ids = [0, 1, 2**31 - 1, 2**31, 2**32 - 1, 2**32, 2**32 + 1, 2**62, 2**63 - 1]
    keys = [lock_keys(chat) for chat in ids]
    assert len(set(keys)) == len(ids)
    assert all(-(2**31) <= key < 2**31 for pair in keys for key in pair)
    assert keys[1] == (TURN_LOCKS, 1) and keys[3] == (TURN_LOCKS, -(2**31))
    with pytest.raises(ValueError, match="not a chat id"):
        lock_keys(-1)


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


def entry(key: str, text: str, images: tuple[str, ...] = ()) -> HeldEntry:
    return HeldEntry(key, "user", text, DATE, images)


def keep(conn: Connection, chat: int, machine: str, e: HeldEntry) -> bool:
    return held.hold(
        conn, chat, machine, e.key, e.kind, e.text, e.date, e.images,
        workdir=e.workdir, agent=e.agent, model=e.model, quiet=e.quiet,
    )  # fmt: skip


def test_held_messages_outlive_the_connection_in_order(
    pg_connect: Callable[..., Connection],
) -> None:
    conn = pg_connect()
    chat = PgChat.open(conn, machine="home").chat
    entries = [
        entry("k2", "second\x00with a NUL", images=("a.png", "b.png")),
        entry("k1", "first"),
        HeldEntry("k\x003", "work", "third", DATE, workdir="/w\x00d", agent="a", model="m"),
        HeldEntry("k4", "user", "a stop report", DATE, quiet=True),
    ]
    assert [keep(conn, chat, "home", e) for e in entries] == [True] * 4
    assert keep(conn, chat, "office", entry("k5", "office's"))
    conn.close()

    again = pg_connect()
    assert held.held_for(again, chat, "home") == entries
    assert held.held_for(again, chat, "office") == [entry("k5", "office's")]
    assert held.held_for(again, chat, "laptop") == []


def test_a_key_is_held_once_and_never_once_logged(pg_connect: Callable[..., Connection]) -> None:
    conn = pg_connect()
    chat = PgChat.open(conn, machine="home")
    assert keep(conn, chat.chat, "home", entry("k1", "hello"))
    assert not keep(conn, chat.chat, "home", entry("k1", "hello again"))
    assert not keep(conn, chat.chat, "office", entry("k1", "hello from elsewhere"))
    chat.append_message("user", "logged", key="k2")
    assert not keep(conn, chat.chat, "home", entry("k2", "logged"))
    assert held.held_for(conn, chat.chat, "home") == [entry("k1", "hello")]
    assert held.held_for(conn, chat.chat, "office") == []

    # logged, the machine stopped before dropping it: not given to a turn again
    chat.append_message("user", "hello", key="k1")
    assert held.held_for(conn, chat.chat, "home") == []
    assert held.drop(conn, chat.chat, ["k1"]) == 1


def test_drop_removes_what_the_log_has(pg_connect: Callable[..., Connection]) -> None:
    conn = pg_connect()
    chat = PgChat.open(conn, machine="home").chat
    for n in range(4):
        assert keep(conn, chat, "home", entry(f"k{n}", f"message {n}"))
    assert held.drop(conn, chat, ["k0", "k2", "never held"]) == 2
    assert held.drop(conn, chat, []) == 0
    assert [e.key for e in held.held_for(conn, chat, "home")] == ["k1", "k3"]
    assert keep(conn, chat, "home", entry("k0", "held again"))  # dropped, never logged
    assert [e.key for e in held.held_for(conn, chat, "home")] == ["k1", "k3", "k0"]


def test_what_hold_refuses(pg_connect: Callable[..., Connection]) -> None:
    conn = pg_connect()
    chat = PgChat.open(conn, machine="home").chat
    with pytest.raises(ValueError, match="'user' or 'work'"):
        held.hold(conn, chat, "home", "k", "echo", "x", DATE)
    with pytest.raises(ValueError, match="has a key"):
        held.hold(conn, chat, "home", "", "user", "x", DATE)
    with conn.transaction(), pytest.raises(ValueError, match="outside a transaction"):
        held.hold(conn, chat, "home", "k", "user", "x", DATE)
    with pytest.raises(PgStoreError, match="not in the database any more"):
        held.hold(conn, chat + 1, "home", "k", "user", "x", DATE)
    assert held.held_for(conn, chat, "home") == []


def test_another_role_sees_neither_turn_nor_held_messages(
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
    assert keep(ann_conn, chat, "home", entry("k1", "ann's secret"))
    ann_turn = TurnLock(lambda: pg_connect(ann_url), chat, "home")
    assert ann_turn.try_take()

    bob_conn = pg_connect(bob_url)
    for table in ("held", "turns"):
        assert bob_conn.execute(f"SELECT count(*) FROM evertalk.{table}").fetchone() == (0,)
    assert held.held_for(bob_conn, chat, "home") == []
    with pytest.raises(PgStoreError, match="not in the database any more"):
        keep(bob_conn, chat, "home", entry("k2", "forged"))
    assert held.drop(bob_conn, chat, ["k1"]) == 0
    bob_turn = TurnLock(lambda: pg_connect(bob_url), chat, "x")
    with pytest.raises(PgStoreError, match="row-level security"):
        bob_turn.holder()
    with pytest.raises(PgStoreError, match="row-level security"):
        bob_turn.try_take()
    assert held.held_for(ann_conn, chat, "home") == [entry("k1", "ann's secret")]
    assert ann_turn.holding() and ann_turn.holder() == "home"
