"""The database going away and coming back (SPEC §13): one line saying so, nothing lost, the
session connecting again after growing delays and going on.

The backoff and the session's schedule are checked on their own, with a clock of the test's;
the faults on real servers: one of the test's own where it is stopped or killed (the session's
server is shared by every test), the shared one where only a connection is cut.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Callable, Iterator
from itertools import cycle, pairwise

import psycopg
import pytest
from hypothesis import given
from hypothesis import strategies as st

from evertalk.pgstore.backoff import SPREAD, Backoff
from evertalk.pgstore.connect import Connection, connect
from evertalk.pgstore.errors import PgStoreError
from evertalk.pgstore.pgchat import PgChat
from evertalk.pgstore.session import DatabaseDown, OutcomeUnknown, PgSession
from evertalk.store.message_log import NewMessage
from pg_server import PgServer
from polling import wait_until

# The backoff

firsts = st.floats(min_value=0.01, max_value=10)
factors = st.floats(min_value=1, max_value=4)
draws = st.lists(st.floats(min_value=0, max_value=1), min_size=1, max_size=40)


@given(firsts, st.floats(min_value=1, max_value=100), factors, st.integers(1, 60))
def test_the_delays_grow_by_the_factor_up_to_the_ceiling(
    first: float, ceiling: float, factor: float, count: int
) -> None:
    most = first * ceiling
    backoff = Backoff(first, most, factor)
    delays = [backoff.next_delay() for _ in range(count)]
    assert delays[0] == first
    for before, after in pairwise(delays):
        assert after == min(most, before * factor)
    assert all(first <= delay <= most for delay in delays)


@given(firsts, factors, draws)
def test_the_jitter_takes_off_at_most_its_spread_and_leaves_the_growth_alone(
    first: float, factor: float, drawn: list[float]
) -> None:
    source = iter(drawn)
    jittered = Backoff(first, first * 50, factor, jitter=lambda: next(source))
    plain = Backoff(first, first * 50, factor)
    for draw in drawn:
        nominal = plain.next_delay()
        delay = jittered.next_delay()
        assert delay == nominal * (1 - SPREAD * draw)
        assert nominal * (1 - SPREAD) <= delay <= nominal


@given(firsts, factors, st.integers(0, 30), st.integers(1, 30))
def test_a_reset_starts_the_delays_over(
    first: float, factor: float, failures: int, count: int
) -> None:
    backoff = Backoff(first, first * 20, factor)
    fresh = Backoff(first, first * 20, factor)
    for _ in range(failures):
        backoff.next_delay()
    backoff.reset()
    assert [backoff.next_delay() for _ in range(count)] == [
        fresh.next_delay() for _ in range(count)
    ]


@pytest.mark.parametrize(
    ("first", "most", "factor"),
    [(0, 1, 2), (-1, 1, 2), (2, 1, 2), (1, 2, 0.5), (float("nan"), 1, 2), (1, float("inf"), 2)],
)
def test_a_backoff_refuses_delays_that_do_not_make_sense(
    first: float, most: float, factor: float
) -> None:
    with pytest.raises(ValueError):
        Backoff(first, most, factor)


@pytest.mark.parametrize("draw", [-0.1, 1.5, float("nan")])
def test_a_jitter_draw_outside_zero_to_one_is_refused(draw: float) -> None:
    with pytest.raises(ValueError, match="jitter draw"):
        Backoff(jitter=lambda: draw).next_delay()


# The session's schedule, with no server

SECRET = "s3cret"
URL = f"postgresql://me:{SECRET}@db.example:5432/chat"


class Clock:
    """The test's time: a sleep moves it on."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.slept: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        assert seconds > 0
        self.slept.append(seconds)
        self.now += seconds


def refused_session(backoff: Backoff) -> tuple[PgSession, Clock, list[float]]:
    """A session whose every try fails (saying the password, which it must not repeat); the
    times of its tries."""
    clock = Clock()
    tries: list[float] = []

    def refuse(url: str) -> Connection:
        tries.append(clock.now)
        raise PgStoreError(
            f"cannot reach the database at db.example:5432/chat: no route (for me:{SECRET})"
        )

    session = PgSession(
        URL, "home", connect=refuse, sleep=clock.sleep, clock=clock, backoff=backoff
    )
    return session, clock, tries


def test_a_session_tries_on_the_backoff_schedule_until_the_deadline() -> None:
    session, clock, tries = refused_session(Backoff(0.5, 2, 2))  # no jitter: an exact schedule
    assert session.status == "not connected to the database at db.example:5432/chat yet"
    start = clock.now
    assert not session.wait_up(start + 10)
    assert [t - start for t in tries] == [0, 0.5, 1.5, 3.5, 5.5, 7.5, 9.5]
    assert clock.now == start + 10  # not a sleep past the deadline
    assert session.status == (
        "the database at db.example:5432/chat cannot be reached: no route (for me:***);"
        " evertalk tries again in 1.5 s"
    )
    with pytest.raises(DatabaseDown) as down:  # no try before it is due: at once, one line
        session.run(lambda chat: chat.message_count, idempotent=True)
    assert len(tries) == 7 and down.value.retry_in == 1.5 and str(down.value) == session.status
    clock.now += 1.5
    with pytest.raises(DatabaseDown, match=r"no route \(for me:\*\*\*\); .* again in 2 s$"):
        session.run(lambda chat: chat.message_count, idempotent=True)
    assert len(tries) == 8
    assert not session.reconnect() and len(tries) == 9  # at once, whatever the backoff says
    assert not session.up


@given(
    st.floats(min_value=0.05, max_value=2),
    st.floats(min_value=1, max_value=20),
    st.floats(min_value=0, max_value=60),
    st.lists(st.floats(min_value=0, max_value=1), min_size=1, max_size=5),
)
def test_the_tries_are_spaced_by_the_delays_and_stop_at_the_deadline(
    first: float, ceiling: float, within: float, drawn: list[float]
) -> None:
    draws = cycle(drawn)
    backoff = Backoff(first, first * ceiling, jitter=lambda: next(draws))
    session, clock, tries = refused_session(backoff)
    start = clock.now
    assert not session.wait_up(start + within)
    again = cycle(drawn)
    schedule = Backoff(first, first * ceiling, jitter=lambda: next(again))
    due = start
    for moment in tries:
        assert moment == pytest.approx(due)
        due += schedule.next_delay()
    assert due > start + within  # the next try would be past the deadline
    assert clock.now == start + within  # and no sleep went past it
    assert SECRET not in session.status


def test_a_malformed_url_is_refused_without_its_password() -> None:
    with pytest.raises(ValueError) as refused:
        PgSession(f"postgresql://me:{SECRET}@db.example:port/chat", "home")
    assert SECRET not in str(refused.value)


# Faults on real servers


def appending(n: int) -> Callable[[PgChat], int]:
    """Log message n under key kN; its id."""
    return lambda chat: chat.append_message("user", f"message {n}", key=f"k{n}")


def read_all(chat: PgChat) -> list[tuple[int, str, str | None]]:
    return [(r.i, r.text, r.key) for r in chat.read_messages(0, 10_000)]


def test_a_stopped_server_says_so_in_one_line_and_the_session_goes_on(
    own_server: PgServer,
) -> None:
    url = own_server.create_database("faults")
    where = f"127.0.0.1:{own_server.port}/faults"
    with PgSession(url, "home", backoff=Backoff(0.2, 1)) as session:
        assert [session.run(appending(n), idempotent=True) for n in range(5)] == list(range(5))
        own_server.shut_down()
        with pytest.raises(DatabaseDown) as down:
            session.run(appending(5), idempotent=True)
        line = str(down.value)
        assert line.startswith(f"the database at {where} cannot be reached: ")
        assert line.endswith("; evertalk tries again in 0.2 s")
        assert "\n" not in line and own_server.password not in line
        assert not session.up
        assert session.status.startswith(f"the database at {where} cannot be reached: ")
        assert own_server.password not in session.status
        assert not session.reconnect()  # a try at once, whatever the backoff says: in 0.4 s
        wait_until(lambda: session.status.endswith("tries again now"), "the next try due")
        with pytest.raises(DatabaseDown, match=r"; evertalk tries again in 0\.8 s$"):
            session.run(appending(5), idempotent=True)  # the delays double

        own_server.start_again()
        assert session.wait_up(time.monotonic() + 20)
        assert session.status == f"connected to the database at {where}"
        assert session.run(appending(5), idempotent=True) == 5  # what failed, sent again
        assert session.run(appending(6), idempotent=True) == 6
        assert session.run(appending(2), idempotent=True) == 2  # logged before the stop

        own_server.shut_down()  # a second time: the delays start over
        with pytest.raises(DatabaseDown, match=r"; evertalk tries again in 0\.2 s$"):
            session.run(appending(7), idempotent=True)
        own_server.start_again()
        assert session.wait_up(time.monotonic() + 20)
        assert session.run(appending(7), idempotent=True) == 7
        logged = session.run(read_all, idempotent=True)
    assert logged == [(n, f"message {n}", f"k{n}") for n in range(8)]


def test_a_server_killed_keeps_every_append_that_returned(own_server: PgServer) -> None:
    url = own_server.create_database("faults")
    returned: list[int] = []
    failed: list[PgStoreError] = []
    with PgSession(url, "home", backoff=Backoff(0.1, 0.5)) as session:

        def write() -> None:
            try:
                while True:
                    returned.append(session.run(appending(len(returned)), idempotent=True))
            except PgStoreError as error:
                failed.append(error)

        writer = threading.Thread(target=write)
        writer.start()
        try:
            wait_until(lambda: len(returned) >= 100, "100 appends")
            own_server.kill()
        finally:
            writer.join(timeout=30)
        assert not writer.is_alive()
        (error,) = failed
        assert isinstance(error, DatabaseDown) and "\n" not in str(error)
        assert own_server.password not in str(error)

        own_server.start_again()
        log = (own_server.root / "server.log").read_text()
        assert "automatic recovery in progress" in log  # from the write-ahead log: a crash
        assert session.wait_up(time.monotonic() + 30)
        n = len(returned)
        assert returned == list(range(n))
        logged = session.run(read_all, idempotent=True)
        assert logged[:n] == [(i, f"message {i}", f"k{i}") for i in range(n)]
        assert len(logged) in (n, n + 1)  # the append in flight may have been committed
        assert session.run(appending(n), idempotent=True) == n  # its key: its id if it was
        assert session.run(appending(n + 1), idempotent=True) == n + 1
        assert session.run(read_all, idempotent=True) == [
            (i, f"message {i}", f"k{i}") for i in range(n + 2)
        ]


class LosingRelay:
    """A TCP relay to the server that can lose one answer: once armed, the next bytes the
    server sends are thrown away and their connection cut both ways. The server did what it
    was asked (it answers after its commit) but the client never hears of it."""

    def __init__(self, port: int) -> None:
        self.upstream = port
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = int(self.listener.getsockname()[1])
        self.armed = threading.Event()
        self.lost = threading.Event()
        self.sockets: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def relayed(self, url: str) -> str:
        return url.replace(f":{self.upstream}/", f":{self.port}/")

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(("127.0.0.1", self.upstream))
            self.sockets += [client, server]
            threading.Thread(target=self._pump, args=(client, server, False), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, True), daemon=True).start()

    def _pump(self, source: socket.socket, sink: socket.socket, answers: bool) -> None:
        try:
            while data := source.recv(65536):
                if answers and self.armed.is_set():
                    self.armed.clear()
                    self.lost.set()
                    break
                sink.sendall(data)
        except OSError:
            pass
        for each in (source, sink):
            _cut(each)

    def close(self) -> None:
        for each in [self.listener, *self.sockets]:
            _cut(each)


def _cut(each: socket.socket) -> None:
    with contextlib.suppress(OSError):
        each.shutdown(socket.SHUT_RDWR)  # wakes a thread blocked on it, as close does not
    each.close()


@pytest.fixture
def relay(pg_server: PgServer) -> Iterator[LosingRelay]:
    relay = LosingRelay(pg_server.port)
    yield relay
    relay.close()


def logged_now(url: str) -> tuple[list[tuple[int, str, str | None]], int]:
    """The log and the number of changes, read over a connection of the test's own."""
    with connect(url) as conn:
        chat = PgChat.open(conn, machine="check", create=False)
        return read_all(chat), chat.seq


def test_an_append_whose_answer_was_lost_is_sent_again_and_logged_once(
    pg_url: str, relay: LosingRelay
) -> None:
    long = NewMessage("user", "page one, page two", key="long")
    with PgSession(relay.relayed(pg_url), "home", backoff=Backoff(0.2, 1)) as session:
        assert session.run(appending(0), idempotent=True) == 0
        relay.armed.set()
        ids = session.run(lambda chat: chat.append_pages(long, ["one", "two"]), idempotent=True)
        assert relay.lost.is_set() and session.up
        assert ids == [1, 2]  # the ids the first, committed, append was given
        assert session.run(appending(3), idempotent=True) == 3
    logged, changes = logged_now(pg_url)
    assert logged == [
        (0, "message 0", "k0"), (1, "one", "long.0"), (2, "two", "long.1"), (3, "message 3", "k3")
    ]  # fmt: skip
    assert changes == 3


def test_an_append_without_a_key_is_not_sent_again(pg_url: str, relay: LosingRelay) -> None:
    with PgSession(relay.relayed(pg_url), "home", backoff=Backoff(0.2, 1)) as session:
        assert session.run(appending(0), idempotent=True) == 0
        relay.armed.set()
        with pytest.raises(OutcomeUnknown) as unknown:
            session.run(lambda chat: chat.append_message("user", "no key"), idempotent=False)
        line = str(unknown.value)
        assert line.startswith(f"the connection to the database at 127.0.0.1:{relay.port}/")
        assert line.endswith(
            ": it may have been made, and is not made again; evertalk is connected again"
        )
        assert "\n" not in line and session.up
        assert session.run(appending(2), idempotent=True) == 2
    logged, _ = logged_now(pg_url)
    assert logged == [(0, "message 0", "k0"), (1, "no key", None), (2, "message 2", "k2")]


def test_a_connection_ended_by_an_administrator_is_replaced_at_once(pg_url: str) -> None:
    with PgSession(pg_url, "home") as session:
        first = session.run(lambda chat: chat.conn.info.backend_pid, idempotent=True)
        with psycopg.connect(pg_url, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (first,))
            wait_until(
                lambda: (
                    admin.execute(
                        "SELECT 1 FROM pg_stat_activity WHERE pid = %s", (first,)
                    ).fetchone()
                    is None
                ),
                "the end of the connection",
            )
        assert session.run(appending(0), idempotent=True) == 0  # no error: connected again
        assert session.run(lambda chat: chat.conn.info.backend_pid, idempotent=True) != first
        assert session.run(read_all, idempotent=True) == [(0, "message 0", "k0")]
