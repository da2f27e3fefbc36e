"""The log's last messages read from the end of its files (what a window shows before the
service answers) are exactly the last messages the store reads through its index: across day
files, long messages in pages, torn last lines and lines too long for the first read."""

from __future__ import annotations

import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from budget import examples
from evertalk.chat import Chat
from evertalk.store.records import MessageRecord
from evertalk.store.tail import FIRST_READ, last_messages

START = datetime(2026, 11, 30, 9, 0, tzinfo=UTC)
KINDS = ("user", "ever", "tool", "echo", "note")

# one message: its kind, how long its text is (past 30,000 characters it takes pages), and how
# many days after the one before it is written
messages = st.lists(
    st.tuples(
        st.sampled_from(KINDS),
        st.sampled_from((1, 40, 900, 31_000, 70_000)),
        st.sampled_from((0, 0, 0, 1)),
    ),
    max_size=30,
)


def write(chat_dir: Path, plan: list[tuple[str, int, int]]) -> list[MessageRecord]:
    """The chat of `plan`; every message the store reads back, in order."""
    date = START
    with Chat.open(chat_dir) as chat:
        for n, (kind, length, days) in enumerate(plan):
            date += timedelta(days=days, seconds=1)
            text = (f"{n}é " * length)[:length]
            chat.append(kind, text, key=f"k{n}", date=date)
        return [chat.store.read_message(i) for i in range(chat.t)]


@settings(max_examples=examples(60), deadline=None)
@given(plan=messages, count=st.sampled_from((1, 3, 40)), torn=st.booleans())
def test_the_tail_is_the_end_of_the_log(
    plan: list[tuple[str, int, int]], count: int, torn: bool
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        chat_dir = Path(folder) / "chat"
        logged = write(chat_dir, plan)
        if torn and logged:  # a write that never finished, at the end of the newest file
            newest = max((chat_dir / "main").iterdir())
            with newest.open("ab") as file:
                file.write(b'{"i": 99999, "kind": "user", "te')
        assert last_messages(chat_dir, count) == logged[-count:]


def test_a_long_message_is_read_whole_past_the_first_read(tmp_path: Path) -> None:
    chat_dir = tmp_path / "chat"
    logged = write(chat_dir, [("user", 20, 0), ("ever", 70_000, 0), ("user", 20, 0)])
    assert len(logged) == 5  # the reply's three pages between the two questions
    assert sum(len(r.text.encode()) for r in logged) > FIRST_READ
    assert last_messages(chat_dir, 4) == logged[-4:]  # pages whose first one is far back
    assert last_messages(chat_dir, 40) == logged


def test_the_pages_of_an_unfinished_write_do_not_count(tmp_path: Path) -> None:
    chat_dir = tmp_path / "chat"
    logged = write(chat_dir, [("user", 20, 0), ("ever", 70_000, 0)])
    newest = max((chat_dir / "main").iterdir())
    lines = newest.read_bytes().splitlines(keepends=True)
    newest.write_bytes(b"".join(lines[:-1]))  # the reply's last page never reached the disk
    assert last_messages(chat_dir, 40) == logged[:1]


def test_a_chat_with_no_log_has_no_tail(tmp_path: Path) -> None:
    assert last_messages(tmp_path / "nothing", 40) == []
    chat_dir = tmp_path / "chat"
    write(chat_dir, [])
    assert last_messages(chat_dir, 40) == []
    write(chat_dir, [("user", 5, 0)])
    assert last_messages(chat_dir, 0) == []


def test_the_last_messages_are_found_in_an_older_day_written_last(tmp_path: Path) -> None:
    """An import appends messages dated long ago: they go to the files of their own days, and
    are the log's last messages all the same."""
    chat_dir = tmp_path / "chat"
    write(chat_dir, [("user", 10, 0), ("ever", 10, 5), ("user", 10, 0), ("ever", 10, 0)])
    long_ago = START - timedelta(days=400)
    with Chat.open(chat_dir) as chat:
        for n in range(3):
            chat.append("note", f"imported {n}", key=f"imported-{n}", date=long_ago)
        logged = [chat.store.read_message(i) for i in range(chat.t)]
    assert [record.text for record in last_messages(chat_dir, 3)] == [
        "imported 0",
        "imported 1",
        "imported 2",
    ]
    assert last_messages(chat_dir, 40) == logged
