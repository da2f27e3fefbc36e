"""An append, a build, a cut and a save of the views are one round trip to the server each, so
that a database far away costs a turn as little as it can; and a change that waits for the
chat's row lock reads what the lock's last holder committed (a resent message's key, T)."""

from __future__ import annotations

import selectors
import socket
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TypeVar

import pytest

from evertalk.memory.core import SavedViews
from evertalk.memory.tree import FREE
from evertalk.pgstore.connect import Connection
from evertalk.pgstore.pgchat import PgChat
from evertalk.store.message_log import NewMessage
from pg_server import PgServer

T = TypeVar("T")

ROUND_TRIPS = 1
"""The round trips of an append, a build, a cut or a save of the views: at most this many."""


class Relay:
    """A TCP relay on loopback to the server's port that counts round trips: the times a client
    sent something after the server had answered it (or first, on a new connection). Requests
    sent together without waiting for an answer count once, however the bytes were split."""

    def __init__(self, target: int) -> None:
        self.target = target
        self.trips = 0
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self._listener.getsockname()[1])
        threading.Thread(target=self._accept, daemon=True).start()

    def close(self) -> None:
        """No more connections (those open end when their client closes them)."""
        self._listener.shutdown(socket.SHUT_RDWR)  # wakes the accept
        self._listener.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.create_connection(("127.0.0.1", self.target))
            threading.Thread(target=self._relay, args=(client, server), daemon=True).start()

    def _relay(self, client: socket.socket, server: socket.socket) -> None:
        answered = True
        with client, server, selectors.DefaultSelector() as selector:
            selector.register(client, selectors.EVENT_READ, (client, server))
            selector.register(server, selectors.EVENT_READ, (server, client))
            while True:
                for ready, _ in selector.select():
                    source, sink = ready.data
                    try:
                        data = source.recv(65536)
                    except OSError:
                        return
                    if not data:
                        return
                    if source is client:
                        if answered:
                            self.trips += 1
                        answered = False
                    else:
                        answered = True
                    sink.sendall(data)


@pytest.fixture
def relay(pg_server: PgServer) -> Iterator[Relay]:
    relay = Relay(pg_server.port)
    yield relay
    relay.close()


def far_chat(
    pg_connect: Callable[..., Connection], pg_server: PgServer, pg_url: str, relay: Relay
) -> PgChat:
    """A chat whose connection goes through the relay."""
    url = pg_url.replace(f":{pg_server.port}/", f":{relay.port}/")
    assert url != pg_url
    return PgChat.open(pg_connect(url), machine="far")


def trips(relay: Relay, do: Callable[[], T]) -> tuple[int, T]:
    """The round trips `do` took, and what it returned."""
    before = relay.trips
    done = do()
    return relay.trips - before, done


def test_the_relay_counts_each_statement_waited_for(
    pg_connect: Callable[..., Connection], pg_server: PgServer, pg_url: str, relay: Relay
) -> None:
    conn = far_chat(pg_connect, pg_server, pg_url, relay).conn

    def three() -> None:
        with conn.transaction():  # BEGIN, the statement, COMMIT
            conn.execute("SELECT 1")

    assert trips(relay, lambda: conn.execute("SELECT 1"))[0] == 1
    assert trips(relay, three)[0] == 3


def test_an_append_is_one_round_trip(
    pg_connect: Callable[..., Connection], pg_server: PgServer, pg_url: str, relay: Relay
) -> None:
    chat = far_chat(pg_connect, pg_server, pg_url, relay)
    assert trips(relay, lambda: chat.append_message("user", "hello")) == (ROUND_TRIPS, 0)
    keyed = NewMessage("user", "hello again", key="abc")
    assert trips(relay, lambda: chat.append_pages(keyed, ["hello again"])) == (ROUND_TRIPS, [1])
    assert trips(relay, lambda: chat.append_pages(keyed, ["hello again"])) == (ROUND_TRIPS, [1])
    paged = NewMessage("ever", "onetwothree", key="long")
    pages = ["one", "two", "three"]
    assert trips(relay, lambda: chat.append_pages(paged, pages)) == (ROUND_TRIPS, [2, 3, 4])
    assert trips(relay, lambda: chat.append_pages(paged, pages)) == (ROUND_TRIPS, [2, 3, 4])
    for n in range(5, 15):  # past the driver's threshold for preparing a statement
        assert trips(relay, lambda: chat.append_message("user", "more")) == (ROUND_TRIPS, n)
    assert chat.message_count == 15 and chat.seq == 13
    assert [r.text for r in chat.read_messages(0, 5)] == ["hello", "hello again", *pages]


def test_a_build_a_cut_and_a_save_are_one_round_trip_each(
    pg_connect: Callable[..., Connection], pg_server: PgServer, pg_url: str, relay: Relay
) -> None:
    chat = far_chat(pg_connect, pg_server, pg_url, relay)
    for n in range(4):
        chat.append_message("user", f"message {n}")
    assert trips(relay, lambda: chat.build(0, 0, "zero")) == (ROUND_TRIPS, True)
    free = [(2, 0, "a free parent", FREE)]
    assert trips(relay, lambda: chat.build(1, 0, "zero and one", free=free)) == (ROUND_TRIPS, True)
    assert trips(relay, lambda: chat.build(0, 0, "again")) == (ROUND_TRIPS, False)
    assert trips(relay, lambda: chat.cut(0, 3, "cut")) == (ROUND_TRIPS, True)
    before = relay.trips
    with pytest.raises(ValueError, match=r"node \(1, 2\) does not exist yet"):
        chat.build(1, 2, "too soon")
    assert relay.trips - before == ROUND_TRIPS
    saved = SavedViews(4, [(2, 0)], None, False, False)
    assert trips(relay, lambda: chat.save_views(saved)) == (ROUND_TRIPS, None)
    assert chat.refused == 1 and chat.seq == 4 + 3
    assert [c.what for c in chat.changes_since(5)] == [
        {"nodes": [[1, 0], [2, 0]]},
        {"nodes": [[0, 3]]},
    ]


def until_waiting(
    watcher: Connection, waiting: Connection, holder: Connection, call: Future[T]
) -> None:
    """Return once `waiting`'s session waits for a lock `holder`'s holds (asked of the server
    again and again: no clock decides it), or `call` is done (it did not wait: it failed)."""
    deadline = time.monotonic() + 30
    query = "SELECT %s = ANY (pg_blocking_pids(%s))"
    pids = (holder.info.backend_pid, waiting.info.backend_pid)
    while not call.done():
        row = watcher.execute(query, pids).fetchone()
        if row is not None and row[0]:
            return
        assert time.monotonic() < deadline, "the second machine never waited for the lock"


def test_a_change_waiting_for_the_lock_reads_what_its_holder_committed(
    pg_connect: Callable[..., Connection],
) -> None:
    home = PgChat.open(pg_connect(), machine="home")
    office = PgChat.open(pg_connect(), machine="office")
    watcher = pg_connect()
    with ThreadPoolExecutor(1) as pool:
        with home.conn.transaction():  # home's append holds the lock until this commit
            assert home.append_message("user", "hello", key="abc") == 0
            resent = pool.submit(office.append_message, "user", "hello", key="abc")
            until_waiting(watcher, office.conn, home.conn, resent)
        assert resent.result(timeout=30) == 0  # found logged under the lock: not a second row
        with home.conn.transaction():
            assert home.append_message("user", "the first of a pair") == 1
            built = pool.submit(office.build, 1, 0, "a pair")  # exists once message 1 does
            until_waiting(watcher, office.conn, home.conn, built)
        assert built.result(timeout=30) is True
    assert office.message_count == 2 and office.seq == 3
    assert [c.machine for c in office.changes_since(0)] == ["home", "home", "office"]
