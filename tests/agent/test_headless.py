"""`evertalk -p` as a user runs it: a subprocess against the fake served on loopback."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from test_turn_support import (
    API_KEY,
    is_compaction,
    log_of,
    turn_bodies,
    workdir_beside,
)

from evertalk.chat import Chat
from evertalk.client.connection import stop_service
from evertalk.ledger import ledger_path, read_records
from evertalk.memory import node_name
from fakes import (
    AnthropicFake,
    Fail,
    RequestRecord,
    ToolCall,
    empty,
    reply,
    slow,
    summarizer,
)
from fakes import chat as answer
from served_home import environment, evertalk, fake, home, run

__all__ = ["fake", "home"]  # the fixtures, used by name

NO_SANDBOX = re.compile(
    r"\[evertalk: commands run without a sandbox here \(.*?said once per session\]\n"
)


def assert_no_key(result: subprocess.CompletedProcess[str]) -> None:
    assert API_KEY not in result.stdout and API_KEY not in result.stderr


WAITING = re.compile(r"waiting for \d+ summar(y|ies) in progress \(Ctrl\+C skips\)")
"""The line -p gives when compaction calls are still running as the turn ends."""


def notes(stderr: str) -> list[str]:
    """The lines of standard error but the wait for summaries in progress (which depends on
    how far the compactor got when the turn ended)."""
    return [line for line in stderr.splitlines() if not WAITING.fullmatch(line)]


def test_prints_the_reply(home: Path, fake: AnthropicFake) -> None:
    fake.behaviour.push(  # type: ignore[attr-defined]
        reply("Let me check.", ToolCall("date", {"id": 0})), answer("It is message 0.")
    )
    result = run(home, "-p", "when did I write this?")
    assert result.returncode == 0, result.stderr
    # streamed as it came: the text before the tool call too, a blank line apart
    assert result.stdout == "Let me check.\n\nIt is message 0.\n"
    assert_no_key(result)
    assert [kind for kind, _ in log_of(home)] == ["user", "ever", "tool", "echo", "ever"]


def test_json_streams_the_events_of_a_message_from_stdin(home: Path, fake: AnthropicFake) -> None:
    fake.behaviour.push(answer("Hello there."))  # type: ignore[attr-defined]
    result = run(home, "-p", "-", "--json", stdin="a message\nof two lines\n")
    assert result.returncode == 0, result.stderr
    events = [json.loads(line) for line in result.stdout.splitlines()]
    types = [event["type"] for event in events]
    # the reply is logged once its call's stream has ended (a broken one is tried again)
    assert types[0] == "turn_started" and types[-3:] == ["call_usage", "reply_logged", "turn_ended"]
    assert "text_delta" in types
    assert events[-1] == {
        "type": "turn_ended",
        "reason": "done",
        "error": None,
        "error_kind": None,
        "retry": False,
    }
    assert "".join(e["text"] for e in events if e["type"] == "text_delta") == "Hello there."
    assert log_of(home)[0] == ("user", "a message\nof two lines")


def test_waits_for_the_subagents_it_started(home: Path, fake: AnthropicFake) -> None:
    script = fake.behaviour
    script.route(  # type: ignore[attr-defined]
        lambda call: "you are the subagent Scout," in call.last_user_text,
        slow(0.5, answer("There are 3 files.")),
    )
    script.push(  # type: ignore[attr-defined]
        reply(ToolCall("agent", {"name": "Scout", "task": "count the files"})),
        answer("Scout is on it."),
        answer("Scout found 3 files."),
    )
    result = run(home, "-p", "have Scout count them")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "Scout is on it.\nScout found 3 files.\n"
    assert ("work", "[Scout] There are 3 files.") in log_of(home)


def test_failures_are_one_line_and_nonzero(home: Path, fake: AnthropicFake) -> None:
    # the model refuses the key
    fake.behaviour.push(Fail(401, f"invalid x-api-key {API_KEY}"))  # type: ignore[attr-defined]
    result = run(home, "-p", "hello")
    assert result.returncode == 1 and result.stdout == ""
    assert len(result.stderr.splitlines()) == 1 and "turn stopped" in result.stderr
    assert_no_key(result)
    assert log_of(home)[-1][0] == "echo" and "[redacted]" in log_of(home)[-1][1]
    for path in home.rglob("*"):
        if path.is_file() and path.name != "config.toml":
            assert API_KEY.encode() not in path.read_bytes(), path
    # the chat is open in another process (not the service, which the first run started)
    stop_service(home)
    with Chat.open(home / "chat"):
        result = run(home, "-p", "hello")
    assert result.returncode == 1
    assert result.stderr.strip().endswith(f"(pid {os.getpid()})")
    assert len(result.stderr.splitlines()) == 1
    # no provider configured
    bare = home.parent / "bare"
    bare.mkdir()
    (bare / "config.toml").write_text('provider = "anthropic"\n')
    result = run(bare, "-p", "hello")
    assert result.returncode == 1 and "ANTHROPIC_API_KEY" in result.stderr
    assert len(result.stderr.splitlines()) == 1 and "Traceback" not in result.stderr
    # wrong flags
    for args in (["-p", "x", "--allow", "rm"], ["--json"], ["-p", "x", "memory", "status"]):
        result = run(home, *args)
        assert result.returncode == 2 and len(result.stderr.splitlines()) == 1, args


def test_shell_runs_only_when_allowed(home: Path, fake: AnthropicFake) -> None:
    marker = workdir_beside(home) / "ran"  # in the workdir: the sandbox's /tmp is its own
    touch = ToolCall("shell", {"command": f"touch {marker}"})
    fake.behaviour.push(  # type: ignore[attr-defined]
        reply(touch), answer("Not allowed."), reply(touch), answer("Done.")
    )
    denied = run(home, "-p", "touch it")
    assert denied.returncode == 0 and denied.stdout == "Not allowed.\n"
    assert not marker.exists()
    echo = log_of(home)[2]
    assert echo[0] == "echo" and "did not allow" in echo[1]
    allowed = run(home, "-p", "touch it", "--allow", "shell,write")
    assert allowed.returncode == 0 and allowed.stdout == "Done.\n"
    assert marker.exists()


def test_workdir_flag_and_setting(home: Path, fake: AnthropicFake, tmp_path: Path) -> None:
    flagged, configured = tmp_path / "flagged", tmp_path / "configured"
    flagged.mkdir()
    configured.mkdir()
    pwd = ToolCall("shell", {"command": "pwd"})
    fake.behaviour.push(  # type: ignore[attr-defined]
        reply(pwd), answer("1"), reply(pwd), answer("2"), reply(pwd), answer("3")
    )
    assert run(home, "-p", "where?", "--allow", "shell").returncode == 0  # cwd: work
    config = home / "config.toml"  # the setting goes first: the file ends with a table
    config.write_text(f'workdir = "{configured}"\n' + config.read_text())
    assert run(home, "-p", "where?", "--allow", "shell").returncode == 0
    result = run(home, "-p", "where?", "--allow", "shell", "--workdir", str(flagged))
    assert result.returncode == 0, result.stderr
    # where bwrap cannot start, the first command's result begins with a note that says so
    echoes = [NO_SANDBOX.sub("", text) for kind, text in log_of(home) if kind == "echo"]
    started = workdir_beside(home)
    assert echoes == [
        f"shell: {where}\n[exit status 0]" for where in (started, configured, flagged)
    ]


def test_images_attached_with_the_flag(home: Path, fake: AnthropicFake, tmp_path: Path) -> None:
    picture = tmp_path / "shot.png"
    picture.write_bytes(b"\x89PNG\r\n\x1a\n" + b"\x01" * 30)
    fake.behaviour.push(answer("A screenshot."))  # type: ignore[attr-defined]
    result = run(home, "-p", "what is this?", "--image", str(picture))
    assert result.returncode == 0, result.stderr
    assert result.stdout == "A screenshot.\n"
    opening = turn_bodies(fake)[0]["messages"][0]["content"]
    assert [block["type"] for block in opening[-2:]] == ["text", "image"]
    assert opening[-1]["source"]["media_type"] == "image/png"

    not_image = tmp_path / "notes.png"
    not_image.write_text("plain text")
    for path in (not_image, tmp_path / "missing.png"):
        refused = run(home, "-p", "and this?", "--image", str(path))
        assert refused.returncode == 2 and refused.stdout == ""
        assert refused.stderr.count("\n") == 1 and str(path) in refused.stderr
    assert len(turn_bodies(fake)) == 1  # a refused image sends nothing
    assert run(home, "--image", str(picture)).returncode == 2  # only with -p


def failing_summaries(home: Path, fake: AnthropicFake) -> str:
    """A long message logged before, whose every summary fails; a settle wait of 4 seconds, long
    enough for the SDK to load and the node's first tries to fail before the turn starts. The
    warning line the run is expected to give."""
    with Chat.open(home / "chat") as chat:
        chat.append("user", "the restore drill took forty minutes; " * 20)
    fake.behaviour.routes.insert(0, (is_compaction, empty()))  # type: ignore[attr-defined]
    config = home / "config.toml"
    config.write_text(config.read_text().replace("settle_timeout = 20", "settle_timeout = 4"))
    return (
        "memory: 0+1 could not be summarized (the model gave no usable line); "
        "it will be tried again"
    )


def test_a_failed_summary_is_a_warning_on_stderr(home: Path, fake: AnthropicFake) -> None:
    warning = failing_summaries(home, fake)
    fake.behaviour.push(answer("Still here."))  # type: ignore[attr-defined]
    result = run(home, "-p", "hello")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "Still here.\n"
    assert notes(result.stderr) == [warning]


def test_a_failed_summary_is_an_event_in_json(home: Path, fake: AnthropicFake) -> None:
    warning = failing_summaries(home, fake)
    fake.behaviour.push(answer("Still here."))  # type: ignore[attr-defined]
    result = run(home, "-p", "hello", "--json")
    assert result.returncode == 0, result.stderr
    events = [json.loads(line) for line in result.stdout.splitlines()]
    assert {"type": "memory_warning", "text": warning} in events
    assert notes(result.stderr) == []


def test_what_opening_repaired_is_a_warning(home: Path, fake: AnthropicFake) -> None:
    with Chat.open(home / "chat") as chat:
        chat.append("user", "first")
    day = next((home / "chat" / "main").glob("*.jsonl"))
    with day.open("ab") as log:
        log.write(b'{"i": 1, "kind": "us')  # a write cut by a crash
    fake.behaviour.push(answer("Fine."))  # type: ignore[attr-defined]
    result = run(home, "-p", "still there?")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "Fine.\n"
    assert "evertalk: warning: " in result.stderr and day.name in result.stderr


def test_an_empty_reply_is_said_on_stderr(home: Path, fake: AnthropicFake) -> None:
    fake.behaviour.push(answer(""))  # type: ignore[attr-defined]
    result = run(home, "-p", "say nothing")
    assert result.returncode == 0, result.stderr
    assert result.stdout == ""
    assert result.stderr == "evertalk: the model gave an empty reply\n"


# -- summaries in progress when the turn ends -------------------------------------------------

LONG_MESSAGE = "please keep these notes: " + "the nightly backup of notes goes to the disk; " * 20
LONG_REPLY = "Noted." + " Backups of the notes run nightly to the disk." * 20


def slow_summaries(fake: AnthropicFake, seconds: float) -> None:
    """Compactions answer `seconds` late; the turn's reply comes at once. The message and the
    reply are long (no free leaf): each needs a compaction call, started during the turn."""
    summaries = slow(seconds, summarizer(100))
    fake.behaviour.routes.insert(0, (is_compaction, summaries))  # type: ignore[attr-defined]
    fake.behaviour.push(answer(LONG_REPLY))  # type: ignore[attr-defined]


def compaction_requests(fake: AnthropicFake) -> list[RequestRecord]:
    return [
        r
        for r in fake.records
        if r.body is not None and r.body.get("tool_choice") == {"type": "none"}
    ]


def built_nodes(home: Path) -> set[str]:
    names: set[str] = set()
    for path in (home / "chat" / "tree").glob("*.jsonl"):
        for line in path.read_text().splitlines():
            if line.startswith("{"):
                record = json.loads(line)
                names.add(node_name((record["l"], record["i"])))
    return names


@pytest.mark.parametrize("as_json", [False, True], ids=["reply", "json"])
def test_summaries_go_on_in_the_service_after_the_exit(
    home: Path, fake: AnthropicFake, as_json: bool
) -> None:
    """`-p` ends with its turn; the summaries it started land in the service: no call is
    abandoned by a client that exits."""
    slow_summaries(fake, 1.0)
    began = time.monotonic()
    result = run(home, "-p", LONG_MESSAGE, *(["--json"] if as_json else []))
    assert result.returncode == 0, result.stderr
    if as_json:  # standard output stays the events, every line one JSON object
        events = [json.loads(line) for line in result.stdout.splitlines()]
        assert events[-1]["type"] == "turn_ended"
    else:
        assert result.stdout == LONG_REPLY + "\n"
    assert notes(result.stderr) == [] and "waiting for" not in result.stderr
    wait_for(lambda: {"0+1", "1+1"} <= built_nodes(home), began)
    # every compaction call that went out was answered in full, and its line was kept
    calls = compaction_requests(fake)
    assert calls and all(call.finished for call in calls)
    wait_for(lambda: len(compaction_records(home)) == len(calls), began)
    assert {r.node for r in compaction_records(home)} <= built_nodes(home)


def compaction_records(home: Path) -> list[Any]:
    return [r for r in read_records(ledger_path(home)).records if r.role == "compaction"]


def wait_for(condition: Callable[[], bool], began: float, timeout: float = 30) -> None:
    while not condition():
        assert time.monotonic() - began < timeout, "not within the time"
        time.sleep(0.05)


def test_a_p_run_killed_mid_turn_leaves_its_turn_to_the_service(
    home: Path, fake: AnthropicFake
) -> None:
    """The turn runs in the service: a client killed during it loses nothing, and the turn is
    neither cut off nor run twice."""
    fake.behaviour.push(  # type: ignore[attr-defined]
        slow(2, answer("the answer it did not wait for")), answer("the next answer")
    )
    process = subprocess.Popen(
        evertalk("-p", "a question"),
        env=environment(home),
        cwd=workdir_beside(home),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        began = time.monotonic()
        wait_for(lambda: bool(turn_bodies(fake)), began)
        process.send_signal(signal.SIGKILL)
    finally:
        process.wait(10)
    result = run(home, "-p", "are you there?")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "the next answer\n"
    assert log_of(home) == [
        ("user", "a question"),
        ("ever", "the answer it did not wait for"),
        ("user", "are you there?"),
        ("ever", "the next answer"),
    ]


def test_a_message_piped_in_without_a_dash_is_the_message(home: Path, fake: AnthropicFake) -> None:
    fake.behaviour.push(answer("Piped and answered."))  # type: ignore[attr-defined]
    result = run(home, "-p", stdin="hi from a pipe\n")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "Piped and answered.\n"
    assert log_of(home)[0] == ("user", "hi from a pipe")
    empty = run(home, "-p", stdin="")
    assert empty.returncode == 2 and "-p needs a MESSAGE" in empty.stderr
