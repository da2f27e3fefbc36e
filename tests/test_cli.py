"""The command line, end to end, as a user runs it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from evertalk.chat import Chat


def run(*args: str, home: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "EVERTALK_HOME"}
    if home is not None:
        env["EVERTALK_HOME"] = str(home)
    return subprocess.run(
        [sys.executable, "-m", "evertalk", *args], capture_output=True, text=True, env=env
    )


def make_chat(home: Path) -> None:
    with Chat.open(home / "chat") as chat:
        chat.append("user", "where does the log rotate?")
        chat.append("ever", "In /etc/logrotate.d/notes, weekly.")
        chat.append("echo", "z" * 800)


def test_status_view_zoom_date(tmp_path: Path) -> None:
    make_chat(tmp_path)
    status = run("memory", "status", home=tmp_path)
    assert status.returncode == 0, status.stderr
    assert "messages  3" in status.stdout
    as_json = json.loads(run("memory", "status", "--json", "--home", str(tmp_path)).stdout)
    assert as_json["messages"] == 3 and as_json["unbuilt"] == 1
    view = run("memory", "view", home=tmp_path).stdout
    assert view.splitlines()[0] == "<chat>" and view.splitlines()[-1] == "</chat>"
    assert "2+1|(not summarized yet: zoom it)" in view
    zoom = run("--home", str(tmp_path), "memory", "zoom", "2", "1")
    assert zoom.stdout == "2+1|echo: " + "z" * 800 + "\n"
    date = run("memory", "date", "1", home=tmp_path)
    assert date.returncode == 0 and len(date.stdout.split()) == 4


def test_errors_are_one_line_and_nonzero(tmp_path: Path) -> None:
    make_chat(tmp_path)
    for args in (
        ("memory", "zoom", "1", "2"),
        ("memory", "zoom", "0", "8"),
        ("memory", "zoom", "x", "1"),
        ("memory", "date", "99"),
        ("memory", "frobnicate"),
        ("memory",),
        ("--nope",),
    ):
        result = run(*args, home=tmp_path)
        assert result.returncode != 0, args
        assert "Traceback" not in result.stderr
        assert len(result.stderr.strip().splitlines()) == 1, (args, result.stderr)


def test_missing_chat(tmp_path: Path) -> None:
    result = run("memory", "status", home=tmp_path / "nowhere")
    assert result.returncode == 1
    assert result.stderr.strip().startswith("evertalk: no chat in")
    bare = run(home=tmp_path / "nowhere")
    assert bare.returncode == 0 and "No chat yet" in bare.stdout


def test_status_does_not_import_model_sdks(tmp_path: Path) -> None:
    make_chat(tmp_path)
    code = (
        "import sys; from evertalk.cli import main; main(['memory', 'status', '--home', "
        f"{str(tmp_path)!r}]); "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('anthropic', 'openai', 'httpx', 'textual', 'anyio')))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.stdout.strip().endswith("[]"), result.stdout
