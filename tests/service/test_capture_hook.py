"""`evertalk capture` end to end: Claude Code's hook payloads on standard input, the real service
(against the Anthropic fake on loopback) and a transcript as Claude Code writes it. The hook
returns at once with nothing on standard output and status 0, whatever it was given; its worker
appends what the transcript has that was not sent yet, under the keys `evertalk import` gives,
so that no message is logged twice."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from agent.test_turn_support import turn_bodies, workdir_beside
from evertalk.chat import Chat
from evertalk.importers import read_paths
from evertalk.protocol.paths import log_path
from fakes import AnthropicFake, slow
from fakes import chat as answer
from service.test_service_socket import environment, fake, home, run, start_p, wait_until

__all__ = ["fake", "home"]  # the fixtures, used by name

pytestmark = pytest.mark.skipif(
    not Path("/proc/self/cmdline").exists(), reason="finds the capture's workers in /proc"
)

SESSION = "5c1e2f0a-8d3b-4c61-9f0e-2b7d4a9c1e35"
PROJECT = "-home-ada-src-shop"
FIXTURE = Path(__file__).parents[1] / "importers/fixtures/claude-code/projects" / PROJECT
SPLIT = 20
"""Lines of the fixture the session has when it is first captured; the rest come later."""

Logged = tuple[str, str | None, str]


def fixture_lines() -> list[bytes]:
    return (FIXTURE / f"{SESSION}.jsonl").read_bytes().splitlines(keepends=True)


def transcript(tmp_path: Path, lines: list[bytes]) -> Path:
    """The session's file where Claude Code keeps it (under a home of the test's own)."""
    path = tmp_path / "claude" / "projects" / PROJECT / f"{SESSION}.jsonl"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"".join(lines))
    return path


def payload(event: str, path: Path | str) -> str:
    """A hook's input as Claude Code sends it."""
    fields: dict[str, object] = {
        "session_id": SESSION,
        "transcript_path": str(path),
        "cwd": "/home/ada/src/shop",
        "permission_mode": "default",
        "hook_event_name": event,
    }
    if event == "UserPromptSubmit":
        fields["prompt"] = "Ship it: commit with a short message. Merci !"
    if event == "Stop":
        fields["stop_hook_active"] = False
    return json.dumps(fields)


def start_hook(home: Path, data: str) -> subprocess.Popen[str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "evertalk", "capture"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environment(home),
        cwd=workdir_beside(home),
    )
    assert process.stdin is not None
    process.stdin.write(data)
    process.stdin.close()
    return process


def finished(process: subprocess.Popen[str]) -> None:
    """The hook has exited 0 having printed nothing (how fast: `make bench`)."""
    assert process.stdout is not None and process.stderr is not None
    out, err = process.stdout.read(), process.stderr.read()
    process.wait(timeout=30)
    assert (process.returncode, out, err) == (0, "", "")


def hook(home: Path, data: str) -> None:
    """Fire the hook as Claude Code does."""
    finished(start_hook(home, data))


def workers(home: Path) -> list[int]:
    """The capture's workers of this home still at work."""
    homes = {os.fsencode(home), os.fsencode(home.resolve())}
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            words = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"evertalk.capture_cli" in words and homes & set(words):
            found.append(int(entry.name))
    return found


def settled(home: Path) -> None:
    wait_until(lambda: not workers(home), "the capture's end", timeout=60)


def logged(home: Path) -> list[Logged]:
    """(kind, key, text) of every message of the chat, oldest first."""
    if not (home / "chat" / "main").exists():
        return []
    with Chat.open(home / "chat", readonly=True) as chat:
        return [
            (record.kind, record.key, record.text)
            for record in (chat.store.read_message(i) for i in range(chat.t))
        ]


def imported(path: Path) -> list[Logged]:
    """What `evertalk import` makes of the transcript."""
    return [(m.kind, m.key, m.text) for m in read_paths([path]).by_conversation()]


def logged_at_least(home: Path, count: int) -> None:
    wait_until(lambda: len(logged(home)) >= count, f"{count} messages in the chat", timeout=60)


def complaints(home: Path) -> list[str]:
    """The capture's lines in the service log."""
    path = log_path(home)
    lines = path.read_text().splitlines() if path.exists() else []
    return [line for line in lines if "] capture: " in line]


def test_a_session_lands_as_it_happens_and_each_message_once(home: Path, tmp_path: Path) -> None:
    lines = fixture_lines()
    session = transcript(tmp_path, lines[:SPLIT])
    hook(home, payload("UserPromptSubmit", session))
    first = imported(session)
    assert len(first) > 5
    logged_at_least(home, len(first))
    settled(home)
    assert logged(home) == first

    with session.open("ab") as file:  # Claude Code goes on with the session
        file.writelines(lines[SPLIT:])
    hook(home, payload("Stop", session))
    whole = imported(session)
    assert [key for _, key, _ in whole[: len(first)]] == [key for _, key, _ in first]
    logged_at_least(home, len(whole))
    settled(home)
    assert logged(home) == first + whole[len(first) :]

    hook(home, payload("Stop", session))  # nothing new: nothing added
    settled(home)
    assert len(logged(home)) == len(whole)

    folder = home / "capture"
    states = list(folder.glob("*.json"))
    assert len(states) == 1
    assert folder.stat().st_mode & 0o777 == 0o700
    assert states[0].stat().st_mode & 0o777 == 0o600
    states[0].unlink()  # a lost state: the keys keep the messages from doubling
    hook(home, payload("Stop", session))
    settled(home)
    assert len(logged(home)) == len(whole)
    assert complaints(home) == []


def test_hooks_fired_together_log_each_message_once(home: Path, tmp_path: Path) -> None:
    session = transcript(tmp_path, fixture_lines())
    events = ("UserPromptSubmit", "Stop", "Stop")
    hooks = [start_hook(home, payload(event, session)) for event in events]
    for process in hooks:
        finished(process)
    whole = imported(session)
    logged_at_least(home, len(whole))
    settled(home)
    assert logged(home) == whole


def test_a_capture_after_an_import_of_the_same_session_adds_nothing(
    home: Path, tmp_path: Path
) -> None:
    session = transcript(tmp_path, fixture_lines())
    done = run(home, "import", str(session), "--yes")
    assert done.returncode == 0, done.stderr
    whole = imported(session)
    assert logged(home) == whole
    hook(home, payload("Stop", session))
    settled(home)
    assert logged(home) == whole
    assert complaints(home) == []


def test_a_capture_during_a_turn_of_evers_is_logged_at_once(
    home: Path, fake: AnthropicFake, tmp_path: Path
) -> None:
    """A captured session is not part of Ever's turn: it goes in while the turn runs, not
    after it (the reply comes after it in the log). The reply is held long enough for a loaded
    machine to run the hook meanwhile."""
    fake.behaviour.push(slow(8, answer("The backup script is fixed.")))  # type: ignore[attr-defined]
    session = transcript(tmp_path, fixture_lines())
    turn = start_p(home, "Fix the backup script.")
    try:
        wait_until(lambda: turn_bodies(fake), "the turn's call")
        hook(home, payload("Stop", session))
        _, err = turn.communicate(timeout=60)
    finally:
        if turn.poll() is None:
            turn.kill()
            turn.communicate()
    assert turn.returncode == 0, err
    whole = imported(session)
    logged_at_least(home, 2 + len(whole))
    settled(home)
    log = logged(home)
    assert [(kind, text) for kind, _, text in log[:1]] == [("user", "Fix the backup script.")]
    assert log[1:-1] == whole
    assert [(kind, text) for kind, _, text in log[-1:]] == [("ever", "The backup script is fixed.")]


def test_what_cannot_be_captured_fails_nothing_and_says_why_in_the_log(
    home: Path, tmp_path: Path
) -> None:
    missing = tmp_path / "claude" / "projects" / PROJECT / "gone.jsonl"
    ours = tmp_path / "notes.jsonl"  # a file the importer reads, but no Claude Code session
    ours.write_text(json.dumps({"role": "user", "text": "hello", "time": "2025-06-01T10:00Z"}))
    for data in ("this is not JSON {", "[1, 2]", json.dumps({"session_id": SESSION})):
        hook(home, data)
    hook(home, payload("Stop", missing))
    assert workers(home) == []  # refused before any worker starts
    hook(home, payload("Stop", ours))
    settled(home)
    assert logged(home) == []
    lines = complaints(home)
    assert len(lines) == 5, lines
    assert "the hook's input is not JSON" in lines[0]
    assert "the hook's input is not a JSON object" in lines[1]
    assert "names no transcript_path" in lines[2]
    assert f"Stop of session {SESSION}: no transcript at {missing}" in lines[3]
    assert f"{ours} is not a Claude Code transcript" in lines[4]


def test_the_hook_loads_neither_the_worker_nor_the_agent(tmp_path: Path) -> None:
    """What the hook imports, checked in a fresh interpreter: Claude Code waits for it."""
    code = (
        "import json, sys, evertalk.cli, evertalk.capture_cli\nprint(json.dumps(list(sys.modules)))"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=120
    )
    assert result.returncode == 0, result.stderr
    heavy = ("anthropic", "openai", "httpx", "anyio", "textual")
    worker = ("importers", "client", "store", "memory", "agent", "providers", "compactor")
    assert not [
        name
        for name in json.loads(result.stdout)
        if name.split(".")[0] in heavy
        or (name.startswith("evertalk.") and name.split(".")[1] in worker)
    ]
