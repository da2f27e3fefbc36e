"""`memory redact` and `memory forget` reach every copy of the text under the home (SPEC §12): a
secret inside a tool call's input (JSON-escaped in the log), one split over a long message's
pages, one in a message whose line was damaged; after each, no file under the home spells it,
in any form (home_scan.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from forget_helpers import SMALL, build_all, make_chat

from evertalk.agent.turn import tool_text
from evertalk.chat import Chat
from evertalk.cli import main
from evertalk.memory.text import MESSAGE_LIMIT
from evertalk.store.search_index import SearchIndex
from home_scan import every_file, files_holding

SECRET = 'zq"pass\\word\nline2é\u0001ǅ'
"""Every escaping JSON has: a quote, a backslash, a newline, beyond ASCII, a control."""


def _searched(chat_dir: Path, chat: Chat) -> None:
    search = SearchIndex.open(chat_dir)
    search.catch_up(chat.store)
    search.close()


def _messages(home: Path) -> list[tuple[str, str]]:
    with Chat.open(home / "chat", readonly=True) as chat:
        return [(r.kind, r.text) for r in (chat.store.read_message(i) for i in range(chat.t))]


def _redact(home: Path, text: str, *more: str) -> int:
    return main(["memory", "redact", text, *more, "--yes", "--home", str(home)])


@pytest.fixture
def tool_home(tmp_path: Path) -> Path:
    """A tool call that wrote the secret into a file, logged with its input as JSON, and a
    subagent's log that holds the same call and what it read back of the file."""
    home = tmp_path / "home"
    chat_dir = make_chat(home, count=12)
    call = tool_text("write", {"path": "notes.txt", "content": f"the key:\n{SECRET}\n"})
    with Chat.open(chat_dir, budget=SMALL) as chat:
        chat.append("tool", call)
        chat.append("echo", "write: wrote 2 lines to notes.txt")
        build_all(chat)
        _searched(chat_dir, chat)
    scout = chat_dir / "agents" / "Scout"
    scout.mkdir(parents=True)
    read = f"read: the key:\n{SECRET}\n"
    lines = [
        {"i": n, "kind": kind, "text": text, "size": len(text.encode()), "date": "x"}
        for n, (kind, text) in enumerate([("tool", call), ("echo", read)])
    ]
    text = "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines)
    (scout / "2026-03-03.jsonl").write_text(text)
    return home


def test_a_secret_in_a_tool_calls_input_is_found_and_leaves_every_file(
    tool_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = files_holding(tool_home, SECRET)
    assert "chat/index/search.sqlite" in " ".join(before) and "chat/agents/Scout" in str(before)
    assert _redact(tool_home, SECRET) == 0
    out = capsys.readouterr().out
    assert "Messages that change: 12" in out and "subagents' logs: chat/agents/Scout" in out
    assert files_holding(tool_home, SECRET) == []
    assert {"chat/index/search.sqlite", "chat/agents/Scout/2026-03-03.jsonl"} <= set(
        every_file(tool_home)
    )
    kind, text = _messages(tool_home)[12]
    name, _, arguments = text.partition(" ")
    assert (kind, name) == ("tool", "write")
    assert json.loads(arguments) == {"path": "notes.txt", "content": "the key:\n[redacted]\n"}


def test_a_forgotten_tool_call_leaves_no_copy_of_what_it_wrote(tool_home: Path) -> None:
    assert main(["memory", "forget", "12", "--yes", "--home", str(tool_home)]) == 0
    assert files_holding(tool_home, SECRET) == []
    assert _messages(tool_home)[12][1].startswith("[forgotten on ")


SPLIT = ("zqsplitleft", "zqsplitright7")
"""A secret whose halves fall on either side of a page boundary."""


@pytest.fixture
def paged_home(tmp_path: Path) -> Path:
    """A message with no space to split at, so that its first page ends inside the secret."""
    home = tmp_path / "home"
    chat_dir = make_chat(home, count=6)
    long = "a" * (MESSAGE_LIMIT - len(SPLIT[0])) + "".join(SPLIT) + "b" * 40
    with Chat.open(chat_dir, budget=SMALL) as chat:
        assert chat.append("user", long) == [6, 7]
        build_all(chat)
        _searched(chat_dir, chat)
    pages = _messages(home)[6:8]
    assert pages[0][1].endswith(SPLIT[0]) and pages[1][1].startswith(SPLIT[1])
    return home


@pytest.mark.parametrize("how", [[], ["--regex"]], ids=["plain", "regex"])
def test_a_secret_over_a_page_boundary_is_found_and_leaves_every_file(
    paged_home: Path, how: list[str]
) -> None:
    secret = "".join(SPLIT)
    before = "".join(text for _, text in _messages(paged_home)[6:8])
    assert _redact(paged_home, secret if not how else "zqsplit[a-z]+7", *how) == 0
    messages = _messages(paged_home)
    assert len(messages) == 8 and [kind for kind, _ in messages[6:8]] == ["user", "user"]
    after = "".join(text for _, text in messages[6:8])
    assert after == before.replace(secret, "[redacted]")
    assert files_holding(paged_home, *SPLIT) == []


DAMAGED = "zqdamaged-4471"
TARGET = 5


@pytest.fixture
def damaged_home(tmp_path: Path) -> Path:
    """Message 5's line holds a byte that is not UTF-8; a repair put a note in its place and
    kept the file as it was in `damaged/`; the summaries over it were built from its text."""
    home = tmp_path / "home"
    chat_dir = make_chat(home, count=12, words={TARGET: DAMAGED})
    day = next(p for p in sorted((chat_dir / "main").iterdir()) if DAMAGED in p.read_text())
    data = day.read_bytes()
    at = data.index(DAMAGED.encode())
    day.write_bytes(data[:at] + b"\xff" + data[at:])
    assert main(["memory", "repair", "--home", str(home)]) == 0
    held = files_holding(home, DAMAGED)
    assert any(name.startswith("chat/damaged/") for name in held)
    assert any(name.startswith("chat/tree/") for name in held)
    return home


def test_a_damaged_message_can_be_forgotten(damaged_home: Path) -> None:
    assert main(["memory", "forget", str(TARGET), "--yes", "--home", str(damaged_home)]) == 0
    assert files_holding(damaged_home, DAMAGED) == []
    [copy] = (damaged_home / "chat" / "damaged").rglob("*.jsonl")
    lines = copy.read_bytes().split(b"\n")
    forgotten = json.loads(next(line for line in lines if line.startswith(b'{"i": 5,')))
    assert forgotten["text"].startswith("[forgotten on ") and b"\xff" not in copy.read_bytes()


def test_a_secret_in_a_damaged_line_can_be_redacted(damaged_home: Path) -> None:
    assert _redact(damaged_home, DAMAGED) == 0
    assert files_holding(damaged_home, DAMAGED) == []
    [copy] = (damaged_home / "chat" / "damaged").rglob("*.jsonl")
    assert b"\xff[redacted]" in copy.read_bytes()  # the other bytes as they were
