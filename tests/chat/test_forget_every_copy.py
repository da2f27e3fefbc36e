"""`memory redact` and `memory forget` reach every copy of the text under the home (SPEC §12): a
secret inside a tool call's input (JSON-escaped in the log), one split over a long message's
pages, one in a message whose line was damaged; after each, no file under the home spells it,
in any form (home_scan.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from forget_helpers import SMALL, build_all, make_chat, message_text

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
    before = {name.split("/")[1] for name in files_holding(tool_home, SECRET)}
    assert before == {"agents", "index", "main", "tree"}  # the log, a summary, the search
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


@pytest.fixture(params=["inside", "at its start"])
def damaged_home(tmp_path: Path, request: pytest.FixtureRequest) -> Path:
    """Message 5's line holds a byte that is not UTF-8 (before the secret, or in place of the
    line's start, where its id was); a repair put a note in its place and kept the file as it
    was in `damaged/`; the summaries over it were built from its text."""
    home = tmp_path / "home"
    chat_dir = make_chat(home, count=12, words={TARGET: DAMAGED})
    day = next(p for p in sorted((chat_dir / "main").iterdir()) if DAMAGED in p.read_text())
    data = day.read_bytes()
    at = data.index(DAMAGED.encode())
    if request.param == "at its start":
        at = data.rindex(b"\n", 0, at) + 1
        data = data[:at] + b"\xff" * 9 + data[at + 9 :]  # `{"i": 5, ` is gone
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
    forgotten = json.loads(next(line for line in lines if b"[forgotten on " in line))
    assert forgotten["i"] == TARGET
    assert forgotten["text"].startswith("[forgotten on ") and b"\xff" not in copy.read_bytes()


def test_a_secret_in_a_damaged_line_can_be_redacted(damaged_home: Path) -> None:
    assert _redact(damaged_home, DAMAGED) == 0
    assert files_holding(damaged_home, DAMAGED) == []
    [copy] = (damaged_home / "chat" / "damaged").rglob("*.jsonl")
    assert b"\xff" in copy.read_bytes() and b"[redacted]" in copy.read_bytes()


WORD = "zqeverywhere-3391"


def _places(home: Path, target: int) -> None:
    """The word where other files under the home keep text: a held message, a subagent's log,
    a tree line set aside (and one over the target that words it its own way), the ledger's
    reason for a rejected summary, the service's log, an MCP server's log, the compactor's
    status, and a day file's rewrite that a crash cut short."""
    chat_dir = home / "chat"
    held = {"key": "k1", "kind": "user", "text": f"and {WORD} again", "date": "x"}
    (chat_dir / "held.jsonl").write_text(json.dumps(held) + "\n")
    (chat_dir / "agents" / "Scout").mkdir(parents=True)
    record = {"i": 0, "kind": "ever", "text": f"found {WORD}", "size": 1, "date": "x"}
    (chat_dir / "agents" / "Scout" / "2026-03-03.jsonl").write_text(json.dumps(record) + "\n")
    (chat_dir / "quarantine").mkdir()
    aside = [
        {"l": 0, "i": 1, "text": f"user: {WORD}", "size": 1},
        {"l": 2, "i": target >> 2, "text": "the user named a flower", "size": 1},
    ]
    (chat_dir / "quarantine" / "tree-x.jsonl").write_text(
        "".join(json.dumps(a) + "\n" for a in aside)
    )
    rejected = {"date": "x", "role": "compaction", "rejected": f"not in its input: {WORD}"}
    (home / "usage.jsonl").write_text(json.dumps(rejected) + "\n")
    (home / "service.log").write_text(f"2026-03-03 [1] warning: {WORD}\nstarted\n")
    (home / "mcp").mkdir()
    (home / "mcp" / "files.log").write_text(f"read {WORD}\n")
    status = {"pid": 1, "last_error": f"a reply repeated {WORD}"}
    (chat_dir / "compactor.json").write_text(json.dumps(status))
    (chat_dir / "main" / "2026-03-02.jsonl.tmp").write_text(json.dumps(held) + "\n")


PLACES = (
    "held messages: chat/held.jsonl",
    "the compactor's status: chat/compactor.json",
    "subagents' logs: chat/agents/Scout/2026-03-03.jsonl",
    "tree lines set aside: chat/quarantine/tree-x.jsonl",
    "the usage ledger: usage.jsonl",
    "the service's log: service.log",
    "MCP servers' logs: mcp/files.log",
    "leftovers of writes a crash cut short: chat/main/2026-03-02.jsonl.tmp",
)


def test_the_preview_names_every_place_and_each_is_scrubbed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home = tmp_path / "home"
    make_chat(home, count=8, words={3: WORD})
    _places(home, 3)
    log = (home / "service.log").stat().st_ino
    assert _redact(home, WORD) == 0
    out = capsys.readouterr().out
    assert [place for place in PLACES if f"  {place}" not in out] == []
    assert files_holding(home, WORD) == []
    assert (home / "service.log").stat().st_ino == log  # its writer appends to it still
    assert (home / "service.log").read_text().endswith("warning: [redacted]\nstarted\n")
    assert not (home / "chat" / "main" / "2026-03-02.jsonl.tmp").exists()


def test_a_forget_takes_the_lines_set_aside_over_the_message(tmp_path: Path) -> None:
    home = tmp_path / "home"
    make_chat(home, count=8, words={3: WORD})
    _places(home, 3)
    aside = home / "chat" / "quarantine" / "tree-x.jsonl"
    kept = aside.read_text().splitlines()[0].replace(WORD, "[kept]")
    aside.write_text(aside.read_text() + kept + "\n")
    assert main(["memory", "forget", "3", "--yes", "--home", str(home)]) == 0
    assert files_holding(home, message_text(3, WORD), "the user named a flower") == []
    assert kept in aside.read_text()  # a line over another message stays
