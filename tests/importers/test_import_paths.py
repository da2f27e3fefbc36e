"""`read_paths`: folders, formats told by content, problems that name the file, stable keys,
and the order the messages are appended in."""

from __future__ import annotations

import subprocess
import sys
import zipfile
from datetime import UTC, datetime
from pathlib import Path

from importer_helpers import (
    CHATGPT_EXPORT,
    CHATGPT_SEARCH,
    CLAUDE_AGENT,
    CLAUDE_SESSION,
    CODEX_NEW,
    CODEX_OLD,
    CODEX_OLD_MCP,
    FIXTURES,
    OWN,
    copy_tree,
)

from evertalk.agent.tools.base import result
from evertalk.agent.turn import tool_text as logged_tool_text
from evertalk.importers import read_paths, record_line
from evertalk.importers.common import echo_text, tool_text

CONVERSATIONS = {
    "5c1e2f0a-8d3b-4c61-9f0e-2b7d4a9c1e35",
    "0199a3c2-7d1e-7b40-9c55-3e8f1a2b4c6d",
    "5973b6c0-94b8-487b-a530-2aeb6098ae0e",
    "66ab12cd-0e1f-8002-9a3b-4c5d6e7f8091",
    "66ab5e6f-7a8b-8003-9c0d-1e2f3a4b5c6d",
    "2b8e41d7-6c0a-4f19-9d3e-7a15c0e2b964",
    "683e6a00-1b2c-8004-9d3e-4f5a6b7c8d9e",
    "e5f6a7b8-0c1d-4e2f-9a3b-4c5d6e7f8a9b",
    "old-assistant",
}


def test_a_folder_is_walked_for_every_source_it_holds() -> None:
    reading = read_paths([FIXTURES])
    assert {c.id for c in reading.conversations} == CONVERSATIONS
    assert sorted(reading.files) == sorted(
        map(
            str,
            [
                CHATGPT_EXPORT / "conversations.json",
                CHATGPT_SEARCH / "conversations.json",
                CLAUDE_AGENT,
                CLAUDE_SESSION,
                CODEX_OLD,
                CODEX_OLD_MCP,
                CODEX_NEW,
                OWN,
            ],
        )
    )
    # the export's other JSON files are not read, so not problems either
    assert sorted((p.file, p.line) for p in reading.problems) == sorted(
        [(str(CLAUDE_SESSION), 36), (str(CODEX_OLD), 9), (str(OWN), 5)]
    )


def test_keys_are_unique_and_the_same_on_every_read() -> None:
    first = [(m.key, m.text, m.time) for m in read_paths([FIXTURES]).messages()]
    second = [(m.key, m.text, m.time) for m in read_paths([FIXTURES]).messages()]
    assert first == second
    assert len({key for key, _, _ in first}) == len(first)


def test_messages_come_oldest_first_each_conversation_in_its_own_order() -> None:
    reading = read_paths([FIXTURES])
    messages = reading.messages()
    assert len(messages) == sum(len(c.messages) for c in reading.conversations)
    times = [m.time for m in messages]
    assert times == sorted(times)
    for conversation in reading.conversations:
        in_reading = [m for m in messages if m in set(conversation.messages)]
        assert in_reading == list(conversation.messages)
    assert messages[0].text == "Notes carried over from my old assistant."  # from 2023
    assert reading.span() == (messages[0].time, messages[-1].time)


def test_a_conversation_whose_clock_steps_back_is_never_reordered(tmp_path: Path) -> None:
    path = tmp_path / "clock.jsonl"
    other = tmp_path / "other.jsonl"
    times = [datetime(2024, 5, 1, 10, m, tzinfo=UTC) for m in (0, 30, 10, 40)]
    path.write_text(
        "".join(record_line("user", f"m{n}", t) for n, t in enumerate(times)), encoding="utf-8"
    )
    other.write_text(
        record_line("note", "between", datetime(2024, 5, 1, 10, 20, tzinfo=UTC)), encoding="utf-8"
    )
    texts = [m.text for m in read_paths([path, other]).messages()]
    # m2 (10:10) stays after m1 (10:30), so the note at 10:20 comes before both
    assert texts == ["m0", "between", "m1", "m2", "m3"]


def test_by_conversation_keeps_each_whole_in_the_order_they_began() -> None:
    reading = read_paths([FIXTURES])
    owner = {m.key: n for n, c in enumerate(reading.conversations) for m in c.messages}
    runs: list[int] = []
    for message in reading.by_conversation():
        if not runs or runs[-1] != owner[message.key]:
            runs.append(owner[message.key])
    assert sorted(runs) == list(range(len(reading.conversations)))  # each in one run
    starts = [reading.conversations[n].messages[0].time for n in runs]
    assert starts == sorted(starts)


def test_kinds_counts_every_message() -> None:
    reading = read_paths([CLAUDE_SESSION])
    kinds = reading.kinds()
    assert sum(kinds.values()) == len(reading.messages())
    assert kinds["tool"] == kinds["echo"] == 6


def test_a_file_of_an_unknown_format_is_a_problem_naming_it_and_the_rest_is_read(
    tmp_path: Path,
) -> None:
    prose = tmp_path / "notes.txt"
    prose.write_text("Dear diary, today I met Claude.\n", encoding="utf-8")
    events = tmp_path / "events.jsonl"
    events.write_text('{"event": "click", "at": 3}\n{"event": "scroll"}\n', encoding="utf-8")
    reading = read_paths([prose, events, OWN, CHATGPT_EXPORT / "user.json"])
    unknown = [p for p in reading.problems if "not a format this importer reads" in p.why]
    assert [p.file for p in unknown] == [
        str(prose),
        str(events),
        str(CHATGPT_EXPORT / "user.json"),
    ]
    assert [c.id for c in reading.conversations] == ["old-assistant"]


def test_a_missing_path_an_empty_file_and_a_zip_of_something_else(tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    archive = tmp_path / "photos.zip"
    with zipfile.ZipFile(archive, "w") as photos:
        photos.writestr("IMG_0001.jpg", b"\xff\xd8\xff\xe0")
    reading = read_paths([tmp_path / "gone.jsonl", empty, archive])
    assert [str(p) for p in reading.problems] == [
        f"{tmp_path / 'gone.jsonl'}: no such file or folder",
        f"{archive}: a zip with no conversations.json: not a ChatGPT export",
    ]
    assert reading.skipped["empty files"] == 1


def test_prompt_histories_in_a_walked_folder_are_passed_over(tmp_path: Path) -> None:
    home = copy_tree(FIXTURES / "claude-code", tmp_path / ".claude")
    (home / "history.jsonl").write_text(
        '{"display":"fix the test","pastedContents":{},"timestamp":1759392843098,'
        '"project":"/home/ada/src/shop"}\n',
        encoding="utf-8",
    )
    reading = read_paths([home])
    assert reading.skipped["prompt history files"] == 1
    assert [p.line for p in reading.problems] == [36]


def test_without_headings_only_the_sources_messages_are_read() -> None:
    with_headings = read_paths([FIXTURES])
    without = read_paths([FIXTURES], headings=False)
    headings = [m for m in with_headings.messages() if m.key.endswith(":start")]
    assert len(headings) == 8  # one per conversation of another agent
    assert [m.key for m in without.messages()] == [
        m.key for m in with_headings.messages() if not m.key.endswith(":start")
    ]


def test_a_file_given_twice_is_read_once() -> None:
    reading = read_paths([CLAUDE_SESSION, CLAUDE_SESSION.parent, str(CLAUDE_SESSION)])
    assert len(reading.conversations) == 1
    assert reading.skipped["records seen before (the same key)"] == 0


def test_tool_messages_are_written_as_the_app_logs_its_own() -> None:
    tool_input = {"command": "ls -la ~/projets/été", "timeout": 30}
    assert tool_text("Bash", tool_input) == logged_tool_text("Bash", tool_input)
    for output in ("", "total 0\n", "x" * 45_000):
        assert echo_text("Bash", output) == result(output).log_text("Bash")


def test_the_package_loads_no_agent_and_no_provider_sdk() -> None:
    code = (
        "import sys, evertalk.importers\n"
        "heavy = ('evertalk.agent', 'evertalk.providers', 'evertalk.service', 'anthropic',\n"
        "         'openai', 'anyio', 'textual', 'msgspec')\n"
        "print(sorted(m for m in sys.modules if m.startswith(heavy)))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def test_a_json_lines_file_whose_first_line_is_torn_is_still_told_and_read(
    tmp_path: Path,
) -> None:
    path = tmp_path / "rollout.jsonl"
    lines = CODEX_NEW.read_text(encoding="utf-8").splitlines(keepends=True)
    path.write_text('{"timestamp":"2025-10-03T14:0\n' + "".join(lines[1:]), encoding="utf-8")
    reading = read_paths([path])
    assert [(p.line, p.why.split(":")[0]) for p in reading.problems] == [(1, "not valid JSON")]
    assert reading.files == [str(path)]
    assert reading.kinds()["user"] == 2
