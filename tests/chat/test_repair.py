"""`evertalk memory repair`, end to end through the command line: a log with a damaged line, a
deleted or cut day file in its middle, or a long message missing a page opens again; every
missing id gets a note that says what was lost, and the files are copied aside first."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from evertalk.chat import Chat
from evertalk.store.errors import CorruptLog
from evertalk.store.lock import ChatLock

TZ = timezone(timedelta(hours=2))
DAYS = [datetime(2026, 4, d, 10, 0, tzinfo=TZ) for d in (1, 2, 3)]
LONG = "the backup job failed twice on the NAS; " * 20  # over 512 bytes: not a free leaf


def run(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "EVERTALK_HOME"}
    return subprocess.run(
        [sys.executable, "-m", "evertalk", "--home", str(home), *args],
        capture_output=True,
        text=True,
        env=env,
    )


def make_chat(home: Path) -> Path:
    """Nine messages over three days (three a day); leaf 1 summarized from its original text."""
    chat_dir = home / "chat"
    with Chat.open(chat_dir) as chat:
        for k in range(9):
            chat.append("user", f"message {k}: {LONG}", date=DAYS[k // 3])
        chat.build((0, 1), "user: message 1 about the NAS backup")
    return chat_dir


def day(chat_dir: Path, n: int) -> Path:
    return chat_dir / "main" / f"2026-04-0{n + 1}.jsonl"


def texts(chat_dir: Path) -> list[tuple[str, str]]:
    with Chat.open(chat_dir, readonly=True) as chat:
        return [(r.kind, r.text) for r in map(chat.store.read_message, range(chat.t))]


def garble(path: Path, line: int, new: bytes) -> None:
    lines = path.read_bytes().splitlines(keepends=True)
    lines[line] = new + b"\n"
    path.write_bytes(b"".join(lines))


@pytest.mark.parametrize(
    ("garbage", "cause"),
    [(b"\xff\xfe not utf-8 \xc3", "not valid JSON"), (b'{"i": 1, "kind": "us', "not valid JSON")],
)
def test_a_damaged_line_is_named_then_repaired_into_a_note(
    tmp_path: Path, garbage: bytes, cause: str
) -> None:
    chat_dir = make_chat(tmp_path)
    before = texts(chat_dir)
    original = day(chat_dir, 0).read_bytes()
    garble(day(chat_dir, 0), 1, garbage)
    status = run(tmp_path, "memory", "status")
    assert status.returncode == 1
    assert f"{day(chat_dir, 0)} line 2: {cause}" in status.stderr
    assert "message 1 cannot be read" in status.stderr and "memory repair" in status.stderr
    assert "follows a gap" not in status.stderr and len(status.stderr.splitlines()) == 1

    repaired = run(tmp_path, "memory", "repair")
    assert repaired.returncode == 0, repaired.stderr
    assert "message 1: damaged" in repaired.stdout and "The chat opens: 9 messages" in (
        repaired.stdout
    )
    after = texts(chat_dir)
    assert after[:1] == before[:1] and after[2:] == before[2:]
    kind, note = after[1]
    assert kind == "note" and "Message 1 could not be read" in note and cause in note
    [copy] = (chat_dir / "damaged").glob("*/main/2026-04-01.jsonl")
    assert str(copy.parent.parent.relative_to(chat_dir)) in note
    assert copy.read_bytes() == original.replace(original.splitlines()[1], garbage)
    assert copy.stat().st_mode & 0o777 == 0o600
    with Chat.open(chat_dir) as chat:
        assert chat.warnings == []
        assert chat.text_of((0, 1)) == "user: message 1 about the NAS backup"  # built: it stays
        assert chat.zoom(0, 2).splitlines()[1] == "1+1|user: message 1 about the NAS backup"
        assert chat.append("user", "and on it goes") == [9]
    assert run(tmp_path, "memory", "repair").stdout.startswith("Nothing to repair")


def test_a_deleted_day_file_in_the_middle_becomes_notes_of_what_was_lost(tmp_path: Path) -> None:
    chat_dir = make_chat(tmp_path)
    before = texts(chat_dir)
    day(chat_dir, 1).unlink()
    with pytest.raises(CorruptLog, match="message 3 is missing from the log"):
        Chat.open(chat_dir, readonly=True)
    repaired = run(tmp_path, "memory", "repair")
    assert repaired.returncode == 0, repaired.stderr
    assert "messages 3–5: lost" in repaired.stdout
    after = texts(chat_dir)
    assert after[:3] == before[:3] and after[6:] == before[6:]
    for i in (3, 4, 5):
        assert after[i][0] == "note" and f"Message {i} is missing" in after[i][1]
    assert not day(chat_dir, 1).exists()  # the notes went with message 2, in the first file
    assert len(day(chat_dir, 0).read_bytes().splitlines()) == 6


def test_a_day_file_cut_mid_line_gets_a_note_for_the_torn_line_and_the_rest(
    tmp_path: Path,
) -> None:
    chat_dir = make_chat(tmp_path)
    path = day(chat_dir, 1)
    data = path.read_bytes()
    path.write_bytes(data[: data.index(b"\n") + 40])  # message 3 whole, 4 torn, 5 gone
    repaired = run(tmp_path, "memory", "repair")
    assert repaired.returncode == 0, repaired.stderr
    after = texts(chat_dir)
    assert after[3][1].startswith("message 3:")
    assert after[4][0] == "note" and "could not be read" in after[4][1] and "torn" in after[4][1]
    assert after[5][0] == "note" and "is missing" in after[5][1]
    assert len(after) == 9


def test_a_long_message_missing_a_page_keeps_the_pages_it_has(tmp_path: Path) -> None:
    chat_dir = tmp_path / "chat"
    pages = [f"page {n} " + "x" * 29_000 + "\n" for n in range(3)]
    with Chat.open(chat_dir) as chat:
        chat.append("user", "before", date=DAYS[0])
        assert chat.append("user", "".join(pages), date=DAYS[0]) == [1, 2, 3]
        chat.append("user", "after", date=DAYS[0])
    records = [json.loads(line) for line in day(chat_dir, 0).read_text().splitlines()]
    assert [(r.get("part"), r.get("parts")) for r in records] == [
        (None, None),
        (0, 3),
        (1, 3),
        (2, 3),
        (None, None),
    ]
    garble(day(chat_dir, 0), 2, b"garbage")
    with pytest.raises(CorruptLog, match="line 3: not valid JSON, so message 1 cannot be read"):
        Chat.open(chat_dir, readonly=True)
    assert run(tmp_path, "memory", "repair").returncode == 0
    after = texts(chat_dir)
    assert after[1] == ("user", pages[0]) and after[3] == ("user", pages[2])
    assert after[2][0] == "note" and "Message 2 could not be read" in after[2][1]
    assert after[4] == ("user", "after")


def test_repair_refuses_while_another_process_owns_the_chat(tmp_path: Path) -> None:
    chat_dir = make_chat(tmp_path)
    garble(day(chat_dir, 1), 1, b"\xff not a record")  # something to repair
    lock = ChatLock.acquire(chat_dir)  # as a service that has the chat holds it
    try:
        repaired = run(tmp_path, "memory", "repair")
    finally:
        lock.release()
    assert repaired.returncode == 1 and len(repaired.stderr.splitlines()) == 1
    assert str(os.getpid()) in repaired.stderr


def test_a_log_with_nothing_to_repair_stops_no_one(tmp_path: Path) -> None:
    """The check reads the log without its lock: the process that owns the chat (a service,
    with its windows) goes on, and the repair says there was nothing to do."""
    chat_dir = make_chat(tmp_path)
    with Chat.open(chat_dir) as chat:
        repaired = run(tmp_path, "memory", "repair")
        chat.append("user", "still the owner")  # nothing took the chat away
    assert repaired.returncode == 0, repaired.stderr
    assert repaired.stdout == "Nothing to repair: every message of the log can be read.\n"
