"""Appends as transactions holding the chat's row lock: dense ids, idempotency keys, NOTIFY,
and the fence of a turn whose lock was taken since."""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timedelta, timezone

import pytest

from evertalk.pgstore.connect import Connection
from evertalk.pgstore.errors import PgStoreError, StaleTurn
from evertalk.pgstore.pgchat import PgChat
from evertalk.pgstore.turns import TurnLock
from evertalk.store.message_log import NewMessage
from evertalk.store.records import MessageRecord, Page


def two_machines(pg_connect: Callable[..., Connection]) -> tuple[PgChat, PgChat]:
    return (
        PgChat.open(pg_connect(), machine="home"),
        PgChat.open(pg_connect(), machine="office"),
    )


def test_two_machines_appending_alternately(pg_connect: Callable[..., Connection]) -> None:
    home, office = two_machines(pg_connect)
    ids = [
        (home if n % 2 == 0 else office).append_message("user", f"message {n}", key=f"k{n}")
        for n in range(200)
    ]
    assert ids == list(range(200))
    records = office.read_messages(0, 200)
    assert [r.text for r in records] == [f"message {n}" for n in range(200)]
    assert home.message_count == 200
    changes = home.changes_since(0)
    assert [c.seq for c in changes] == list(range(1, 201))
    assert [c.machine for c in changes[:4]] == ["home", "office", "home", "office"]
    assert [c.what for c in changes[:2]] == [{"append": [0, 1]}, {"append": [1, 1]}]
    assert [c.seq for c in office.changes_since(198)] == [199, 200]


def test_two_machines_appending_at_once(pg_connect: Callable[..., Connection]) -> None:
    machines = two_machines(pg_connect)

    def send(machine: PgChat) -> list[int]:
        return [machine.append_message("user", f"{machine.machine} {n}") for n in range(100)]

    with ThreadPoolExecutor(2) as pool:
        home_ids, office_ids = pool.map(send, machines)
    assert sorted(home_ids + office_ids) == list(range(200))
    assert home_ids == sorted(home_ids) and office_ids == sorted(office_ids)
    texts = [r.text for r in machines[0].read_messages(0, 200)]
    assert sorted(texts) == sorted(
        [f"home {n}" for n in range(100)] + [f"office {n}" for n in range(100)]
    )
    assert machines[1].seq == 200


def test_a_resent_message_is_logged_once(pg_connect: Callable[..., Connection]) -> None:
    home, office = two_machines(pg_connect)
    assert home.append_message("user", "hello", key="abc") == 0
    assert office.append_message("user", "hello", key="abc") == 0
    long = NewMessage("ever", "onetwothree", key="long")
    assert home.append_pages(long, ["one", "two", "three"]) == [1, 2, 3]
    assert office.append_pages(long, ["one", "two", "three"]) == [1, 2, 3]
    assert home.logged("long") and not home.logged("other")
    assert home.message_count == 4 and home.seq == 2


def log(chat: PgChat, kind: str, text: str, key: str | None, epoch: int | None) -> list[int]:
    return chat.log_pages(NewMessage(kind, text, key), [text], epoch=epoch)[0]


def test_a_turn_whose_lock_was_taken_since_logs_nothing(
    pg_connect: Callable[..., Connection],
) -> None:
    home, office = two_machines(pg_connect)
    home_turn = TurnLock(pg_connect, home.chat, "home")
    office_turn = TurnLock(pg_connect, home.chat, "office")
    first = home_turn.try_take()
    assert first is not None
    assert log(home, "user", "home's question", "q", first) == [0]
    home_turn.close()  # home's session is gone: its turn goes on, unaware
    second = office_turn.try_take()
    assert second == first + 1
    assert log(office, "user", "office's question", "o", second) == [1]
    with pytest.raises(StaleTurn, match="another machine's turn"):
        log(home, "ever", "home's late answer", "a", first)
    assert home.message_count == 2 and home.seq == 2  # nothing logged, no change
    # what it logged in its own turn, sent again after a lost reply, is still its own
    assert log(home, "user", "home's question", "q", first) == [0]
    assert log(home, "note", "outside any turn", None, None) == [2]  # not fenced
    assert log(office, "ever", "office's answer", "oa", second) == [3]
    texts = [r.text for r in home.read_messages(0, 10)]
    assert texts == ["home's question", "office's question", "outside any turn", "office's answer"]
    # each turn's appends name its epoch in the stream; an append outside a turn names none
    epochs = [c.what.get("epoch") for c in home.changes_since(0)]
    assert epochs == [first, second, None, second]


def test_records_read_as_the_file_store_writes_them(pg_connect: Callable[..., Connection]) -> None:
    chat = PgChat.open(pg_connect(), machine="home")
    when = datetime(2026, 3, 1, 9, 30, tzinfo=timezone(timedelta(hours=2)))
    message = NewMessage("tool", "héllowörld", "t", ["a.png"], "sub", when, failed=True)
    chat.append_pages(message, ["héllo", "wörld"])
    first, second = chat.read_messages(0, 2)
    assert first == MessageRecord(
        0, "tool", "héllo", 6, "2026-03-01T09:30:00+02:00", key="t.0", images=("a.png",),
        agent="sub", page=Page(0, 2), failed=True,
    )  # fmt: skip
    assert second.images is None and second.page == Page(1, 2) and second.key == "t.1"
    with pytest.raises(IndexError):
        chat.read_message(2)
    with pytest.raises(ValueError, match="unknown message kind"):
        chat.append_message("shout", "no")


def test_copied_records_must_follow_the_chat(pg_connect: Callable[..., Connection]) -> None:
    chat = PgChat.open(pg_connect(), machine="home")
    chat.append_message("user", "first")
    late = MessageRecord(5, "user", "late", 4, "2026-03-01T09:30:00+00:00")
    with pytest.raises(PgStoreError, match="do not follow the chat's 1 messages"):
        chat.insert_records([late])
    assert chat.message_count == 1 and chat.seq == 1


def test_an_append_wakes_the_listeners(pg_connect: Callable[..., Connection]) -> None:
    home, office = two_machines(pg_connect)
    office.conn.execute(f"LISTEN {office.channel}")
    home.append_message("user", "wake up")
    woken = list(office.conn.notifies(timeout=10, stop_after=1))
    assert [(n.channel, n.payload) for n in woken] == [(office.channel, "1")]
