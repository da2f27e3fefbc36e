"""`evertalk import` end to end: through the command line and the real service (against the
Anthropic fake on loopback). A preview first, then the messages oldest first with their own
times, each once however often the same files are imported, a run killed midway resumed, and
what cannot be read named and counted."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

from agent.test_turn_support import workdir_beside
from evertalk.chat import Chat
from service.test_service_socket import environment, fake, home, run

__all__ = ["fake", "home"]  # the fixtures, used by name

START = datetime(2024, 3, 1, 9, 0, tzinfo=UTC)


def history(path: Path, count: int, *, start: int = 0) -> Path:
    """Our own JSON Lines: `count` messages, a user's and Ever's in turn, a minute apart."""
    lines = []
    for n in range(start, start + count):
        role = "user" if n % 2 == 0 else "assistant"
        when = (START + timedelta(minutes=n)).isoformat()
        lines.append(json.dumps({"role": role, "text": f"old message {n}", "time": when, "id": n}))
    path.write_text("\n".join(lines) + "\n")
    return path


def log_of(home: Path) -> list[tuple[str, str, str]]:
    """(kind, text, date) of every message, oldest first."""
    with Chat.open(home / "chat", readonly=True) as chat:
        return [
            (record.kind, record.text, record.date)
            for record in (chat.store.read_message(i) for i in range(chat.t))
        ]


def test_a_preview_then_the_messages_with_their_own_times_once(home: Path, tmp_path: Path) -> None:
    source = history(tmp_path / "notes.jsonl", 6)
    first = run(home, "import", str(source), "--yes")
    assert first.returncode == 0, first.stderr
    assert "messages     6: ever 3, user 3" in first.stdout
    assert "dates        2024-03-01 to 2024-03-01" in first.stdout
    assert "compaction calls" in first.stdout
    assert "imported 6 messages (0 were already in the chat)" in first.stdout
    log = log_of(home)
    assert [(kind, text) for kind, text, _ in log] == [
        ("user" if n % 2 == 0 else "ever", f"old message {n}") for n in range(6)
    ]
    assert log[5][2].startswith("2024-03-01T09:05:00")
    again = run(home, "import", str(source), "--yes")
    assert "imported 0 messages (6 were already in the chat)" in again.stdout, again.stderr
    assert len(log_of(home)) == 6
    said = run(home, "memory", "date", "3")
    assert said.returncode == 0 and "2024-03-01" in said.stdout


def test_without_a_terminal_it_asks_for_yes_and_imports_nothing(home: Path, tmp_path: Path) -> None:
    source = history(tmp_path / "notes.jsonl", 2)
    result = run(home, "import", str(source))
    assert result.returncode == 2
    assert result.stderr.strip().endswith("(add --yes to import without the question)")
    assert not (home / "chat" / "main").exists() or log_of(home) == []


def test_what_cannot_be_read_is_named_and_the_rest_imported(home: Path, tmp_path: Path) -> None:
    source = history(tmp_path / "notes.jsonl", 3)
    with source.open("a") as file:
        file.write('{"role": "user", "text": "torn\n')
    odd = tmp_path / "odd.jsonl"
    odd.write_text('{"something": "else"}\n')
    result = run(home, "import", str(source), str(odd), "--yes")
    assert result.returncode == 0, result.stderr
    assert "could not read 2:" in result.stdout
    assert f"{source}, line 4" in result.stdout and str(odd) in result.stdout
    assert len(log_of(home)) == 3
    nothing = run(home, "import", str(odd), "--yes")
    assert nothing.returncode == 1 and "nothing to import" in nothing.stderr


def test_an_import_killed_midway_goes_on_where_it_stopped(home: Path, tmp_path: Path) -> None:
    source = history(tmp_path / "long.jsonl", 3_000)
    process = subprocess.Popen(
        [sys.executable, "-m", "evertalk", "import", str(source), "--yes"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=environment(home),
        cwd=workdir_beside(home),
    )
    assert process.stderr is not None
    first = process.stderr.readline()  # the first batch is in
    assert "messages" in first, first
    os.kill(process.pid, signal.SIGKILL)
    process.wait(timeout=30)
    done = len(log_of(home))
    assert 0 < done < 3_000
    rest = run(home, "import", str(source), "--yes", timeout=300)
    assert rest.returncode == 0, rest.stderr
    log = log_of(home)
    assert [text for _, text, _ in log] == [f"old message {n}" for n in range(3_000)]
