"""A failed tool call is marked in its `echo` record (`"failed": true`) and in its
`tool_finished` event: an error result, a refusal, a command that exited non-zero, was killed or
timed out. A call that worked leaves the key out, so that its line reads as lines always did.
Also: what a permission question tells of a `write` (the service's side) and how it reads."""

from __future__ import annotations

import json
from pathlib import Path

import msgspec
import pytest
from test_turn_support import collect_turn, opened, records_of, script, turn_bodies

from evertalk.agent.asking import DIFF_LINES, ask_frame, write_change
from evertalk.agent.permissions import CALL_WORKDIR, AskedInput
from evertalk.client.asks import request, request_line
from evertalk.client.headless import answered
from evertalk.protocol.events import ToolFinished, TurnEnded
from evertalk.protocol.replies import Ask
from evertalk.store.fast_lines import REFUSED, decode_message_line
from evertalk.store.records import MessageRecord, encode_message, read_message_line
from fakes import AnthropicFake, ToolCall, reply
from fakes import chat as answer

pytestmark = pytest.mark.anyio

CALLS = [
    ToolCall("shell", {"command": "echo fine"}),
    ToolCall("shell", {"command": "echo broken; exit 3"}),
    ToolCall("shell", {"command": "kill -9 $$"}),
    ToolCall("shell", {"command": "sleep 30", "timeout": 1}),
    ToolCall("write", {"path": "x.txt", "content": "no"}),  # `ask`, and no one to ask: denied
    ToolCall("read", {"path": "missing.txt"}),  # an error result
]


# -- the record ---------------------------------------------------------------------------------


def test_the_key_is_written_only_for_a_failed_call() -> None:
    failed = encode_message(4, "echo", "shell: [exit status 1]", "d", "k", failed=True)
    assert json.loads(failed)["failed"] is True
    assert list(json.loads(failed)) == ["i", "kind", "text", "size", "date", "key", "failed"]
    worked = encode_message(4, "echo", "shell: [exit status 0]", "d", "k")
    assert "failed" not in json.loads(worked)
    assert read_message_line(failed) == MessageRecord(
        4, "echo", "shell: [exit status 1]", 22, "d", key="k", failed=True
    )
    record = read_message_line(worked)
    assert isinstance(record, MessageRecord) and not record.failed


@pytest.mark.parametrize("value", [b"true", b"false"])
def test_the_fast_decoder_reads_the_key_as_the_definition_does(value: bytes) -> None:
    raw = b'{"i": 0, "kind": "echo", "text": "a", "size": 1, "date": "d", "failed": ' + value + b"}"
    fast = decode_message_line(raw)  # no refusal: such lines keep the fast path of a rebuild
    record = read_message_line(raw)
    assert isinstance(record, MessageRecord)
    assert fast.failed is record.failed is (value == b"true")


@pytest.mark.parametrize("value", [b'"yes"', b"1", b"null"])
def test_a_malformed_mark_goes_to_the_definition_which_drops_it(value: bytes) -> None:
    raw = b'{"i": 0, "kind": "echo", "text": "a", "size": 1, "date": "d", "failed": ' + value + b"}"
    with pytest.raises(REFUSED):
        decode_message_line(raw)
    assert read_message_line(raw) == MessageRecord(0, "echo", "a", 1, "d")


# -- the turn -----------------------------------------------------------------------------------


async def test_each_failed_call_is_marked_in_the_log_and_the_event(home: Path) -> None:
    fake = AnthropicFake(script().push(reply(*CALLS), answer("Done.")))
    async with opened(home, fake, granted=["shell"]) as agent:
        agent.submit("try these")
        seen = await collect_turn(agent, timeout=30)
    assert isinstance(seen[-1], TurnEnded) and seen[-1].reason == "done"
    finished = [event for event in seen if isinstance(event, ToolFinished)]
    assert [event.failed for event in finished] == [False, True, True, True, True, True]
    echoes = [record for record in records_of(home) if record["kind"] == "echo"]
    assert [record.get("failed") for record in echoes] == [None, True, True, True, True, True]
    assert echoes[1]["text"].endswith("[exit status 3]")
    # bash killed: by the signal, or as the sandbox reports it
    assert echoes[2]["text"].endswith(("[killed by signal 9]", "[exit status 137]"))
    assert echoes[3]["text"].endswith("[timed out after 1 s]")
    # what the model reads is as before: a status other than 0 is a plain result it reads
    results = [
        block
        for message in turn_bodies(fake)[-1]["messages"]
        if isinstance(message["content"], list)
        for block in message["content"]
        if block.get("type") == "tool_result"
    ]
    assert [bool(block.get("is_error")) for block in results] == [
        False,
        False,
        False,
        True,
        True,
        True,
    ]


# -- what a question about a write tells ----------------------------------------------------------


def test_a_write_question_says_whether_the_file_exists_and_what_changes(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text("one\ntwo\nthree\n")
    assert write_change(tmp_path, "new.md", "hi\n") == {"exists": False}
    change = write_change(tmp_path, "app.py", "one\n2\nthree\n")
    assert change["exists"] is True
    diff = change["diff"].splitlines()
    assert diff[:2] == ["--- app.py (now)", "+++ app.py (new)"]
    assert diff[2:] == ["@@ -1,3 +1,3 @@", " one", "-two", "+2", " three"]
    same = write_change(tmp_path, "app.py", "one\ntwo\nthree\n")
    assert same["diff"] == "[the new content is the same as the file's]"
    (tmp_path / "blob").write_bytes(b"\xff\xfe\x00")
    assert "not UTF-8 text" in write_change(tmp_path, "blob", "x")["diff"]


def test_a_long_diff_is_clipped_and_says_how_much_is_left_out(tmp_path: Path) -> None:
    (tmp_path / "big.txt").write_text("".join(f"line {n}\n" for n in range(1000)))
    change = write_change(tmp_path, "big.txt", "")
    lines = change["diff"].splitlines()
    assert len(lines) == DIFF_LINES + 1
    assert lines[-1] == f"[{1000 + 3 - DIFF_LINES:,} more lines of the diff not shown]"


def test_the_ask_frame_of_a_write_carries_the_change_from_the_calls_folder(
    tmp_path: Path,
) -> None:
    (tmp_path / "notes.md").write_text("old\n")
    token = CALL_WORKDIR.set(tmp_path)
    try:
        asked = AskedInput({"path": "notes.md", "content": "new\n"}, "Scout")
    finally:
        CALL_WORKDIR.reset(token)
    frame = ask_frame("q1", "write", asked)
    assert frame["exists"] is True and "-old\n+new" in frame["diff"]
    assert frame["agent"] == "Scout" and frame["outside"] is False
    shell = ask_frame("q2", "shell", AskedInput({"command": "ls"}))
    assert "exists" not in shell and "diff" not in shell


# -- how a question reads -------------------------------------------------------------------------


def frame(tool: str, tool_input: dict[str, object], **more: object) -> Ask:
    """An `ask` frame as a client reads it (`agent` and `outside` as the service says them)."""
    fields = {"id": "q", "tool": tool, "input": tool_input, "agent": None, "outside": False}
    return msgspec.convert({"type": "ask", **fields, **more}, Ask)


def test_each_tool_has_its_own_words() -> None:
    write = {"path": "src/app.py", "content": "x"}
    assert request(frame("write", write, exists=True)) == (
        "Ever wants to replace src/app.py (a file that exists)"
    )
    assert request(frame("write", write, exists=False)) == "Ever wants to create src/app.py"
    assert request(frame("write", write)) == "Ever wants to write src/app.py"
    assert request(frame("shell", {"command": "ls"})) == "Ever wants to run a shell command:"
    assert request(frame("edit", {"path": "a.py"})) == "Ever wants to edit a.py"
    assert request(frame("read", {"path": "/etc/hosts"})) == "Ever wants to read /etc/hosts"
    assert (
        request(frame("fetch", {"url": "https://x.test/"})) == "Ever wants to fetch https://x.test/"
    )
    assert request(frame("grep", {"q": "x"})) == "Ever wants to use the grep tool"
    assert request(frame("edit", {"path": "/etc/x"}, outside=True, agent="Scout")) == (
        "Ever's subagent Scout wants to edit /etc/x, outside the working directory"
    )
    assert request_line(frame("shell", {"command": "ls\n-la"})) == (
        "Ever wants to run a shell command: ls -la"
    )


def test_p_says_in_the_same_words_how_it_answered() -> None:
    shell = frame("shell", {"command": "touch x"})
    assert answered(shell, True) == (
        "evertalk: Ever wants to run a shell command: touch x — allowed once (--allow shell)"
    )
    assert answered(shell, False) == (
        "evertalk: Ever wants to run a shell command: touch x — denied (-p --allow shell allows it)"
    )
    outside = frame("write", {"path": "/etc/x", "content": ""}, outside=True, exists=False)
    assert answered(outside, False) == (
        "evertalk: Ever wants to create /etc/x, outside the working directory — denied "
        "(outside the working directory, only the app can allow it)"
    )
