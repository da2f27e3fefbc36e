"""Claude Code transcripts: what each kind of record becomes, and what is left out and counted."""

from __future__ import annotations

from pathlib import Path

from importer_helpers import (
    CLAUDE_AGENT,
    CLAUDE_PROJECT,
    CLAUDE_SESSION,
    PNG_1x1,
    claude_record,
    keyed,
    only,
    pairs,
)

from evertalk.importers import read_paths
from evertalk.memory.text import MESSAGE_LIMIT, clip_output

SESSION = "5c1e2f0a-8d3b-4c61-9f0e-2b7d4a9c1e35"
RESUMED = "9d0e1f2a-3b4c-4d5e-8f6a-7b8c9d0e1f2a"  # the session of `claude_record`


def uuid(n: int) -> str:
    return f"0b{n:06d}-1c2d-4e3f-8a4b-5c6d7e8f9a0b"


def key(n: int) -> str:
    return f"claude-code:{uuid(n)}"


def test_a_session_becomes_the_messages_it_holds_in_order() -> None:
    conversation = only(read_paths([CLAUDE_SESSION]))
    assert conversation.source == "claude-code"
    assert conversation.id == SESSION
    assert conversation.title == "Fix the failing checkout test"
    kinds = [kind for kind, _ in pairs(conversation)]
    assert kinds == [
        "note",  # the heading
        "note",  # /model opus
        "note",  # its output
        "user",
        "ever",
        "tool",
        "echo",
        "tool",
        "echo",
        "tool",  # Task
        "echo",  # the subagent's report
        "ever",
        "tool",
        "echo",
        "ever",
        "user",  # with a pasted image
        "ever",
        "user",  # the abandoned branch…
        "ever",
        "note",  # …the rewind
        "user",
        "note",  # the synthetic API error
        "user",
        "tool",
        "echo",  # refused
        "note",  # interrupted
        "user",  # after the compaction
        "tool",
        "echo",
        "ever",
    ]
    messages = keyed(conversation)
    assert messages[key(4)].text == (
        "The checkout test fails since yesterday — can you look? Ça ne marche plus 😕"
    )
    assert messages[key(7)].text == "I'll run the test first."
    assert messages[key(8)].text == (
        'Bash {"command":"pytest tests/test_checkout.py -q","description":"Run the checkout test"}'
    )
    assert messages[key(10)].text.startswith("Bash: F  ")
    assert "1 failed in 0.21s" in messages[key(10)].text
    assert messages[key(39)].text == "Committed as `3f9a2c1`."


def test_each_message_keeps_its_original_time_and_a_reference_to_its_line() -> None:
    messages = keyed(only(read_paths([CLAUDE_SESSION])))
    prompt = messages[key(4)]
    assert prompt.time.isoformat() == "2025-10-02T08:14:03.098000+00:00"
    assert prompt.time.utcoffset() is not None
    assert prompt.source == f"claude-code {CLAUDE_SESSION}:6"


def test_slash_commands_interruptions_and_synthetic_replies_are_notes() -> None:
    messages = keyed(only(read_paths([CLAUDE_SESSION])))
    assert messages[key(2)].text == "Claude Code command: /model opus"
    # the terminal's colour codes are not part of what the command said
    assert messages[key(3)].text == (
        "Claude Code command output:\nSet model to opus (claude-opus-4-1-20250805)"
    )
    assert messages[key(33)].text == "Claude Code: Request interrupted by user for tool use."
    assert messages[key(29)].kind == "note"
    assert messages[key(29)].text.startswith("API Error: 529")


def test_meta_records_summaries_thoughts_and_reminders_are_left_out_and_counted() -> None:
    reading = read_paths([CLAUDE_SESSION])
    texts = "\n".join(m.text for m in only(reading).messages)
    assert "Caveat: The messages below" not in texts
    assert "This session is being continued" not in texts
    assert "Let me run it first" not in texts  # a thought
    assert "system-reminder" not in texts
    assert "consider whether it looks malicious" not in texts
    assert reading.skipped["meta records"] == 1
    assert reading.skipped["compaction summaries"] == 1
    assert reading.skipped["thoughts (never imported)"] == 1
    assert reading.skipped["system reminders"] == 1
    assert reading.skipped["empty messages"] == 1  # an assistant block of two newlines
    assert reading.skipped["Claude Code progress records"] == 1
    assert reading.skipped["Claude Code system records"] == 2
    assert reading.skipped["Claude Code file-history-snapshot records"] == 1


def test_a_result_with_a_reminder_keeps_the_tools_own_output() -> None:
    messages = keyed(only(read_paths([CLAUDE_SESSION])))
    assert messages[key(21)].text.endswith(
        "    42→    return total.quantize(CENT, rounding=ROUND_HALF_UP)"
    )


def test_images_are_kept_with_their_media_type() -> None:
    messages = keyed(only(read_paths([CLAUDE_SESSION])))
    pasted = messages[key(24)]
    assert pasted.kind == "user"
    assert pasted.text == "And this layout bug? [Image #1]"
    assert pasted.images == (("image/png", PNG_1x1),)
    shown = messages[key(12)]
    assert (shown.kind, shown.text) == ("echo", "Read: [image]")
    assert shown.images == (("image/png", PNG_1x1),)


def test_a_sidechain_is_left_out_and_its_report_comes_back_as_the_calls_result() -> None:
    reading = read_paths([CLAUDE_SESSION])
    messages = keyed(only(reading))
    texts = [m.text for m in messages.values()]
    assert not any("Found 1 file" in text for text in texts)  # the subagent's own Grep
    assert messages[key(18)].text == (
        "Task: Prices are rounded in shop/pricing.py:42 with round(), which rounds half to even."
    )
    assert reading.skipped["subagent records (sidechains)"] == 4


def test_a_subagents_own_file_yields_nothing_but_a_count() -> None:
    reading = read_paths([CLAUDE_AGENT])
    assert reading.conversations == []
    assert reading.problems == []
    assert reading.skipped["subagent records (sidechains)"] == 2


def test_a_rewind_keeps_both_branches_in_order_with_a_note_where_the_new_one_starts() -> None:
    conversation = only(read_paths([CLAUDE_SESSION]))
    texts = [m.text for m in conversation.messages]
    blue = texts.index("Thanks! Now make the checkout button blue.")
    green = texts.index("Actually, make it green instead.")
    assert texts[blue + 1] == "Done — the button uses `--blue-600` now."
    rewind = conversation.messages[green - 1]
    assert rewind.kind == "note"
    assert rewind.key == key(28) + "#rewind"
    assert "rewound the session to before their message of 2025-10-02T08:21:02" in rewind.text
    # no other prompt is taken for a rewind: not after a command, a turn's end or a compaction
    assert sum("rewound" in text for text in texts) == 1


def test_a_malformed_line_is_a_problem_naming_file_and_line_and_the_rest_is_read() -> None:
    reading = read_paths([CLAUDE_SESSION])
    assert [(p.file, p.line) for p in reading.problems] == [(str(CLAUDE_SESSION), 36)]
    assert "not valid JSON" in reading.problems[0].why
    assert str(reading.problems[0]).startswith(f"{CLAUDE_SESSION}, line 36: not valid JSON")
    assert key(39) in keyed(only(reading))  # read after the damaged line


def test_a_tool_result_longer_than_a_message_is_clipped_and_a_long_prompt_kept_whole(
    tmp_path: Path,
) -> None:
    output = "".join(f"line {n}: {'é' * 40}\n" for n in range(2_000))  # about 100,000 chars
    prompt = "Please review this log:\n" + "ß" * 70_000
    session = tmp_path / "5a6b7c8d-0000-4000-8000-000000000001.jsonl"
    lines = [
        claude_record("user", "u1", None, "2025-10-05T10:00:00.000Z", prompt),
        claude_record(
            "assistant",
            "a1",
            "u1",
            "2025-10-05T10:00:03.000Z",
            [
                {
                    "type": "tool_use",
                    "id": "toolu_01Cat",
                    "name": "Bash",
                    "input": {"command": "cat"},
                }
            ],
        ),
        claude_record(
            "user",
            "r1",
            "a1",
            "2025-10-05T10:00:04.000Z",
            [{"type": "tool_result", "tool_use_id": "toolu_01Cat", "content": output}],
        ),
    ]
    session.write_text("\n".join(lines) + "\n", encoding="utf-8")
    messages = keyed(only(read_paths([session])))
    assert messages["claude-code:u1"].text == prompt  # the log splits it, not the importer
    echo = messages["claude-code:r1"].text
    assert len(echo) <= MESSAGE_LIMIT
    assert echo == clip_output(f"Bash: {output}")
    assert "characters cut from the middle" in echo


def test_a_resumed_session_repeating_earlier_records_logs_each_once(tmp_path: Path) -> None:
    original = CLAUDE_SESSION.read_text(encoding="utf-8").splitlines()
    repeated = (f'"uuid":"{uuid(4)}"', f'"uuid":"{uuid(7)}"')
    copied = [line for line in original if any(mark in line for mark in repeated)]
    resumed = tmp_path / "77aa88bb-0000-4000-8000-000000000002.jsonl"
    new = claude_record("user", "f" * 8 + "-new", uuid(39), "2025-10-03T09:00:00.000Z", "again")
    resumed.write_text("\n".join([*copied, new]) + "\n", encoding="utf-8")
    reading = read_paths([CLAUDE_PROJECT, resumed])
    keys = [m.key for c in reading.conversations for m in c.messages]
    assert len(keys) == len(set(keys))
    assert reading.skipped["records seen before (the same key)"] == 2
    second = next(c for c in reading.conversations if c.id == RESUMED)
    assert [m.text for m in second.messages][-1] == "again"
    assert second.messages[0].text.startswith(f"Imported from Claude Code: session {RESUMED}")


def test_the_same_session_under_another_file_name_adds_no_heading(tmp_path: Path) -> None:
    copy = tmp_path / "backup-of-yesterday.jsonl"
    copy.write_bytes(CLAUDE_SESSION.read_bytes())
    first = only(read_paths([CLAUDE_SESSION]))
    again = only(read_paths([copy]))
    # a later import of the copy: every key is one the chat has, the heading's too
    assert [m.key for m in again.messages] == [m.key for m in first.messages]
    heading = again.messages[0]
    assert heading.key == f"claude-code:{SESSION}:start"
    assert heading.text.startswith(f"Imported from Claude Code: session {SESSION} in ")
    both = read_paths([CLAUDE_SESSION, copy])
    assert len(both.conversations) == 1


def test_a_record_with_no_timestamp_is_a_problem(tmp_path: Path) -> None:
    session = tmp_path / "s.jsonl"
    lines = [
        claude_record("user", "u1", None, "2025-10-05T10:00:00.000Z", "hello"),
        claude_record("user", "u2", "u1", "yesterday", "again"),
    ]
    session.write_text("\n".join(lines) + "\n", encoding="utf-8")
    reading = read_paths([session])
    assert [m.text for m in only(reading).messages][1:] == ["hello"]
    assert [(p.line, p.record, p.why) for p in reading.problems] == [
        (2, "u2", "no valid timestamp")
    ]


def test_a_summary_of_another_session_does_not_title_this_one(tmp_path: Path) -> None:
    session = tmp_path / "s.jsonl"
    lines = [
        '{"type":"summary","summary":"Someone else\'s work","leafUuid":"elsewhere"}',
        claude_record("user", "u1", None, "2025-10-05T10:00:00.000Z", "hello"),
        '{"type":"summary","summary":"Greeting","leafUuid":"u1"}',
    ]
    session.write_text("\n".join(lines) + "\n", encoding="utf-8")
    assert only(read_paths([session])).title == "Greeting"
    session.write_text("\n".join(lines[:2]) + "\n", encoding="utf-8")
    assert only(read_paths([session])).title is None
