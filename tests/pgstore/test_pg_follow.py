"""Following the other machines' changes: `Follower` folds each change once, in sequence order,
whatever order, repetition or gaps its batches come with; `Listener` wakes when another machine
commits one, and says in one line that its connection was lost."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from itertools import pairwise
from threading import Event
from typing import Any
from urllib.parse import urlsplit

import pytest
from hypothesis import given
from hypothesis import strategies as st

from evertalk.pgstore.chats import Change
from evertalk.pgstore.connect import Connection
from evertalk.pgstore.errors import PgStoreError
from evertalk.pgstore.follow import Follower
from evertalk.pgstore.listen import Listener
from evertalk.pgstore.pgchat import PgChat

# The follower alone: batches made up here.


def dense_run(count: int, own: frozenset[int] = frozenset()) -> list[Change]:
    """Changes 1 … count, those in `own` made by "home", the others by "office"."""
    return [
        Change(seq, "home" if seq in own else "office", {"append": [seq - 1, 1]})
        for seq in range(1, count + 1)
    ]


@st.composite
def shuffled(draw: st.DrawFn) -> tuple[list[Change], list[list[Change]]]:
    """A dense run of changes, and batches that hold each of them at least once, in any order
    and cut anywhere."""
    run = dense_run(draw(st.integers(0, 40)))
    repeats = draw(st.lists(st.sampled_from(run), max_size=2 * len(run))) if run else []
    stream = draw(st.permutations(run + repeats))
    cuts = sorted(draw(st.lists(st.integers(0, len(stream)), max_size=12)))
    edges = [0, *cuts, len(stream)]
    return run, [stream[a:b] for a, b in pairwise(edges)]


@given(shuffled())
def test_each_change_is_folded_once_in_order(case: tuple[list[Change], list[list[Change]]]) -> None:
    run, batches = case
    follower = Follower("office")
    folded: list[Change] = []
    seen: set[int] = set()
    for batch in batches:
        folded += follower.feed(batch)
        seen |= {change.seq for change in batch}
        assert folded == run[: follower.seq]
        gap = follower.missing
        if gap is None:
            assert follower.held == 0
        else:
            # the first gap: changes not seen yet, just before one that is held
            assert gap.start == follower.seq + 1 and len(gap) > 0
            assert not seen & set(gap) and gap.stop in seen
    assert folded == run
    assert follower.seq == len(run) and follower.missing is None and follower.held == 0


@given(shuffled(), st.data())
def test_gaps_are_reported_and_filled_by_reading_them_again(
    case: tuple[list[Change], list[list[Change]]], data: st.DataObject
) -> None:
    run, batches = case
    follower = Follower("office")
    folded: list[Change] = []
    seen: set[int] = set()
    for batch in batches:
        # a lost wake-up, or a change committed after a later one was read: some never come
        kept = [each for each in batch if data.draw(st.booleans(), label="kept")]
        seen |= {change.seq for change in kept}
        folded += follower.feed(kept)
        while (gap := follower.missing) is not None:
            assert not seen & set(gap)  # none of them came
            folded += follower.feed(run[gap.start - 1 : gap.stop - 1])  # read again
        assert folded == run[: follower.seq]
        assert follower.seq == max(seen, default=0)  # all that came is folded, nothing more
    assert follower.held == 0


@st.composite
def two_machines_events(draw: st.DrawFn) -> tuple[list[Change], list[tuple[str, int]]]:
    """A dense run whose changes in `own` are this machine's ("home"), and the events of its
    follower in any order: each other change read (some more than once), each own change
    folded as committed and maybe read back too."""
    count = draw(st.integers(1, 30))
    own = frozenset(draw(st.sets(st.integers(1, count))))
    run = dense_run(count, own)
    events = [("read", seq) for seq in range(1, count + 1) if seq not in own]
    events += [("own", seq) for seq in own]
    events += [("read", seq) for seq in draw(st.lists(st.integers(1, count), max_size=count))]
    return run, draw(st.permutations(events))


@given(two_machines_events())
def test_an_own_change_is_folded_after_every_change_before_it(
    case: tuple[list[Change], list[tuple[str, int]]],
) -> None:
    run, events = case
    follower = Follower("home")
    folded: list[Change] = []
    for kind, seq in events:
        before = follower.seq
        if kind == "own":
            change = run[seq - 1]
            got = follower.fold_own(seq, change.what)
            if seq == before + 1:
                assert got[0] == change  # nothing missing before it: folded at once
            else:
                assert got == []  # folded already, or held until the gap before it is filled
                gap = follower.missing
                assert seq <= before or (gap is not None and gap.start == before + 1 <= seq)
        else:
            got = follower.feed([run[seq - 1]])
        folded += got
        assert folded == run[: follower.seq]
    assert folded == run


def test_a_follower_starts_where_it_was_left() -> None:
    follower = Follower("home", seq=5)
    run = dense_run(8)
    assert follower.feed(run[:5]) == []
    assert follower.feed(run[6:]) == [] and follower.missing == range(6, 7)
    assert follower.fold_own(6, {"append": [5, 1]}) == [
        Change(6, "home", {"append": [5, 1]}), run[6], run[7]
    ]  # fmt: skip
    assert follower.fold_own(6, {"append": [5, 1]}) == []  # folded already
    assert follower.seq == 8 and follower.missing is None


def test_a_follower_refuses_what_no_feed_holds() -> None:
    follower = Follower("home")
    with pytest.raises(ValueError, match="sequence number 0"):
        follower.feed([Change(0, "office", {})])
    follower.feed([Change(3, "office", {})])
    with pytest.raises(ValueError, match="both 'office' and 'home'"):
        follower.fold_own(3, {})
    with pytest.raises(ValueError, match="negative"):
        Follower("home", seq=-1)


# The listener, on a real server.

LONG = 60.0
"""A wait's timeout in these tests, as long as the test waits for it: a wait that ends by its
timeout returns nothing, so a change returned was brought by a notification."""


def two_machines(pg_connect: Callable[..., Connection]) -> tuple[PgChat, PgChat]:
    return (
        PgChat.open(pg_connect(), machine="home"),
        PgChat.open(pg_connect(), machine="office"),
    )


@pytest.fixture
def listeners() -> Iterator[list[Listener]]:
    """Listeners closed at the end of the test."""
    opened: list[Listener] = []
    yield opened
    for listener in opened:
        listener.close()


class Blocking:
    """A spy on `listener`'s waits for a notification: `started` is set when it is about to
    block (its read before found nothing, so only a notification or its timeout can end that
    wait), and `woken_by` holds the channels of the notifications those waits returned."""

    def __init__(self, listener: Listener, monkeypatch: pytest.MonkeyPatch) -> None:
        self.started = Event()
        self.woken_by: list[str] = []
        self._notifies = listener.conn.notifies
        monkeypatch.setattr(listener.conn, "notifies", self._spied)

    def _spied(self, *, timeout: float | None = None, stop_after: int | None = None) -> Any:
        if timeout is not None and timeout <= 0:
            return self._notifies(timeout=timeout, stop_after=stop_after)  # a drain: no wait
        self.started.set()
        return self._recorded(self._notifies(timeout=timeout, stop_after=stop_after))

    def _recorded(self, notifies: Iterator[Any]) -> Iterator[Any]:
        for notify in notifies:
            self.woken_by.append(notify.channel)
            yield notify


def test_a_listener_wakes_when_another_machine_appends(
    pg_connect: Callable[..., Connection],
    pg_url: str,
    listeners: list[Listener],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    home, office = two_machines(pg_connect)
    listener = Listener(pg_url, home.chat)
    listeners.append(listener)
    assert listener.wait(0, timeout=0) == []
    spy = Blocking(listener, monkeypatch)
    with ThreadPoolExecutor(1) as pool:
        woken = pool.submit(listener.wait, 0, LONG)
        assert spy.started.wait(LONG)
        office.append_message("user", "hello")
        changes = woken.result(LONG)
    assert changes == [Change(1, "office", {"append": [0, 1]})]
    assert spy.woken_by == [listener.channel]  # the append's notification ended the wait
    # committed already: returned at once; nothing after it: the timeout ends the wait, even
    # with the notification of change 2 come while nobody waited
    home.append_message("user", "again")
    assert [c.seq for c in listener.wait(0, timeout=LONG)] == [1, 2]
    assert listener.wait(2, timeout=0.2) == []


def follow(listener: Listener, follower: Follower, upto: int) -> list[Change]:
    """Fold the changes until `upto`, each batch read from the listener's wait."""
    folded = []
    while follower.seq < upto:
        changes = listener.wait(follower.seq, timeout=LONG)
        assert changes, f"no change came after {follower.seq} within {LONG} seconds"
        folded += follower.feed(changes)
    return folded


def test_two_machines_taking_turns_fold_the_same_changes(
    pg_connect: Callable[..., Connection], pg_url: str, listeners: list[Listener]
) -> None:
    """Each machine appends only once it has folded the other's last change, which its listener
    must wake it for; its own change it folds as committed."""
    machines = two_machines(pg_connect)
    # one listener from a URL, one from a function opening connections
    listeners += [Listener(pg_url, machines[0].chat), Listener(pg_connect, machines[1].chat)]
    turns = 200

    def take_turns(turn: int) -> tuple[Follower, list[Change]]:
        chat, listener = machines[turn], listeners[turn]
        follower = Follower(chat.machine)
        folded = []
        for n in range(turn, turns, 2):
            folded += follow(listener, follower, n)
            assert follower.seq == n  # the other machine waits for this one's turn
            chat.append_message("user", f"message {n}", key=f"k{n}")
            folded += follower.fold_own(n + 1, {"append": [n, 1]})
        folded += follow(listener, follower, turns)
        return follower, folded

    with ThreadPoolExecutor(2) as pool:
        (home, home_folded), (office, office_folded) = pool.map(take_turns, (0, 1))
    feed = machines[0].changes_since(0)
    assert machines[0].seq == turns and home.seq == office.seq == turns
    assert home_folded == office_folded == feed
    assert [c.machine for c in feed[:4]] == ["home", "office", "home", "office"]
    assert [r.text for r in machines[1].read_messages(0, turns)] == [
        f"message {n}" for n in range(turns)
    ]


def test_followers_keep_up_with_appends_alternating_between_two_machines(
    pg_connect: Callable[..., Connection], pg_url: str, listeners: list[Listener]
) -> None:
    """The appends do not wait for the followers: their batches hold one change or several."""
    machines = two_machines(pg_connect)
    listeners += [Listener(pg_url, chat.chat) for chat in machines]
    appends = 200

    def keep_up(turn: int) -> tuple[Follower, list[Change]]:
        follower = Follower(machines[turn].machine)
        return follower, follow(listeners[turn], follower, appends)

    with ThreadPoolExecutor(2) as pool:
        following = [pool.submit(keep_up, turn) for turn in (0, 1)]
        for n in range(appends):
            machines[n % 2].append_message("user", f"message {n}")
        (home, home_folded), (office, office_folded) = (each.result(LONG) for each in following)
    feed = machines[1].changes_since(0)
    assert machines[1].seq == appends and home.seq == office.seq == appends
    assert home_folded == office_folded == feed
    assert [c.seq for c in feed] == list(range(1, appends + 1))


def test_a_listener_whose_connection_is_killed_says_so_in_one_line(
    pg_connect: Callable[..., Connection],
    pg_url: str,
    listeners: list[Listener],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    home, _ = two_machines(pg_connect)
    listener = Listener(pg_url, home.chat)
    listeners.append(listener)
    spy = Blocking(listener, monkeypatch)
    killer = pg_connect()
    with ThreadPoolExecutor(1) as pool:
        woken = pool.submit(listener.wait, 0, LONG)
        assert spy.started.wait(LONG)
        killer.execute("SELECT pg_terminate_backend(%s)", (listener.conn.info.backend_pid,))
        with pytest.raises(PgStoreError) as lost:
            woken.result(LONG)
    with pytest.raises(PgStoreError) as again:
        listener.wait(0, timeout=0)
    password = urlsplit(pg_url).password
    assert password
    for error in (lost.value, again.value):
        message = str(error)
        assert message.startswith("lost the connection to the database at 127.0.0.1:")
        assert "\n" not in message and password not in message
        assert error.__cause__ is None and error.__suppress_context__
    listener.close()
    listener.close()  # closing twice does nothing


def test_a_listener_that_cannot_listen_says_so(
    pg_connect: Callable[..., Connection], pg_url: str
) -> None:
    url = pg_url.replace(urlsplit(pg_url).password or "", "wrong-password")
    with pytest.raises(PgStoreError) as refused:
        Listener(url, 1)
    assert "\n" not in str(refused.value) and "wrong-password" not in str(refused.value)

    def broken() -> Connection:
        conn = pg_connect()
        conn.close()
        return conn

    with pytest.raises(PgStoreError, match=r"^lost the connection to the database at"):
        Listener(broken, 1)


class ReadFailed(Exception):
    """The database went away while a change was being applied."""


@given(st.integers(1, 12), st.data())
def test_a_change_that_fails_to_apply_is_applied_again_and_none_is_skipped(
    count: int, data: st.DataObject
) -> None:
    """The position moves past a change only once it is applied: a read that fails half-way
    through a batch (the database restarting) leaves the follower at the change that failed,
    and the next read of the feed applies it and what follows, once each."""
    run = dense_run(count)
    failing = set(data.draw(st.sets(st.integers(1, count)), label="failing"))
    follower = Follower("office")
    applied: list[int] = []

    def apply(change: Change) -> int:
        if change.seq in failing:
            failing.discard(change.seq)  # fails once, then the database is back
            raise ReadFailed
        applied.append(change.seq)
        return change.seq

    while follower.seq < count:
        before = follower.seq
        try:
            follower.feed(run[follower.seq :], apply)  # what changes_since(seq) reads
        except ReadFailed:
            assert follower.seq == len(applied) and follower.seq >= before
    assert applied == list(range(1, count + 1))
    assert follower.held == 0 and follower.missing is None
