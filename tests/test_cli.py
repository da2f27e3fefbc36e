"""The command line, end to end, as a user runs it."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

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
    nowhere = tmp_path / "nowhere"
    # a new user asking for the status is not in error: it says where the chat will be
    for args in (("memory", "status"), ()):
        result = run(*args, home=nowhere)
        assert result.returncode == 0 and result.stderr == "", args
        assert (
            result.stdout
            == f"No chat yet in {nowhere / 'chat'}: it starts with your first message.\n"
        )
    as_json = run("memory", "status", "--json", home=nowhere)
    assert as_json.returncode == 0
    assert json.loads(as_json.stdout) == {
        "path": str(nowhere / "chat"),
        "exists": False,
        "messages": 0,
    }
    # looking into a chat that is not there is an error
    for args in (("memory", "view"), ("memory", "zoom", "0", "1"), ("memory", "date", "0")):
        result = run(*args, home=nowhere)
        assert result.returncode == 1, args
        assert result.stderr.strip().startswith("evertalk: no chat in"), args


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


def configured_home(home: Path, *lines: str) -> Path:
    """A home whose config has a key (never used: these runs stop before any model call)."""
    home.mkdir(parents=True, exist_ok=True)
    text = 'provider = "anthropic"\napi_key = "sk-ant-test-0123456789"\n' + "\n".join(lines)
    (home / "config.toml").write_text(text + "\n")
    return home


def run_in_terminal(*args: str, home: Path) -> subprocess.CompletedProcess[str]:
    """`evertalk` with a terminal on stdin and stdout (a pty), as when a user starts the app;
    stderr is captured. The runs here must end before the app draws anything."""
    env = {k: v for k, v in os.environ.items() if k != "EVERTALK_HOME"}
    env["EVERTALK_HOME"] = str(home)
    leader, follower = pty.openpty()
    try:
        return subprocess.run(
            [sys.executable, "-m", "evertalk", *args],
            stdin=follower,
            stdout=follower,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            timeout=60,
        )
    finally:
        os.close(follower)
        os.close(leader)


def assert_one_line_error(result: subprocess.CompletedProcess[str], *parts: str) -> None:
    assert result.returncode == 1, result.stderr
    assert "Traceback" not in result.stderr
    (line,) = result.stderr.strip().splitlines()
    assert line.startswith("evertalk: ")
    for part in parts:
        assert part in line, line


@pytest.mark.parametrize("broken", ["not utf-8", "a directory"])
def test_unusable_instructions_are_one_line_errors(tmp_path: Path, broken: str) -> None:
    home = configured_home(tmp_path / "home")
    instructions = home / "instructions.md"
    if broken == "a directory":
        instructions.mkdir()
    else:
        instructions.write_bytes(b"I like \xff\xfe short answers\n")
    why = "not UTF-8" if broken == "not utf-8" else "Is a directory"
    assert_one_line_error(run("-p", "hello", home=home), str(instructions), why)
    assert_one_line_error(run_in_terminal(home=home), str(instructions), why)


def test_workdir_flag_and_setting_must_name_a_folder(tmp_path: Path) -> None:
    home = configured_home(tmp_path / "home")
    missing = tmp_path / "missing"
    for args in (
        ("-p", "hello", "--workdir", str(missing)),
        ("--workdir", str(missing)),
        ("--workdir", str(tmp_path), "memory", "status"),
    ):
        result = run(*args, home=home)
        assert result.returncode == 2, (args, result.stderr)
        assert len(result.stderr.strip().splitlines()) == 1 and "--workdir" in result.stderr
    flagged = run("-p", "hello", "--workdir", str(missing), home=home)
    assert flagged.stderr == f"evertalk: --workdir: {missing} does not exist\n"
    # the same folder named in config.toml: the -p run and the app both refuse it
    configured_home(home, f'workdir = "{missing}"')
    for result in (run("-p", "hello", home=home), run_in_terminal(home=home)):
        assert_one_line_error(result, str(home / "config.toml"), f"{missing} does not exist")


def test_a_message_the_shell_split_says_to_quote_it(tmp_path: Path) -> None:
    for flag in ("-p", "--print"):
        result = run(flag, "what", "is", "this", home=tmp_path)
        assert result.returncode == 2 and result.stdout == ""
        assert (
            result.stderr
            == f"evertalk: {flag} takes the message as one argument: put it in quotes\n"
        )
    assert "invalid choice: 'bogus'" in run("memory", "bogus", home=tmp_path).stderr
