"""The command line, end to end, as a user runs it."""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys
from functools import partial
from pathlib import Path

import pytest

from evertalk.chat import Chat
from evertalk.cli import main


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
    """A home whose config has a key (never used: these runs stop before any model call),
    private as evertalk writes it (one that others may read is tightened, with a warning)."""
    home.mkdir(parents=True, exist_ok=True)
    text = 'provider = "anthropic"\napi_key = "sk-ant-test-0123456789"\n' + "\n".join(lines)
    (home / "config.toml").write_text(text + "\n")
    (home / "config.toml").chmod(0o600)
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


# A message (or a summary of it) that would clear the screen, retitle the window and ask the
# terminal to answer (C1 CSI, `\x9b6n`) if it reached a terminal raw.
HOSTILE = "clear\x1b[2J\x1b]0;pwned\x07 and \x9b6n"
RAW_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")


def hostile_chat(home: Path) -> int:
    """A chat whose second message holds HOSTILE (short: its line in the view is the message
    itself); that message's id."""
    with Chat.open(home / "chat") as chat:
        chat.append("user", "run the script")
        (i,) = chat.append("echo", HOSTILE)
    return i


def test_view_and_zoom_show_control_characters_escaped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    i = hostile_chat(tmp_path)
    shown = "clear\\x1b[2J\\x1b]0;pwned\\x07 and \\x9b6n"
    for args in (("memory", "view"), ("memory", "zoom", str(i), "1")):
        assert main(["--home", str(tmp_path), *args]) == 0
        out, err = capsys.readouterr()
        assert not RAW_CONTROLS.search(out + err), (args, out)
        assert shown in out, (args, out)
    with Chat.open(tmp_path / "chat", readonly=True) as chat:  # the log keeps it as written
        assert chat.store.read_message(i).text == HOSTILE


def test_an_open_config_is_made_private_even_when_a_setting_is_wrong(tmp_path: Path) -> None:
    home = configured_home(tmp_path / "home", f'workdir = "{tmp_path / "missing"}"')
    config = home / "config.toml"
    for start in (partial(run, "-p", "hello"), run_in_terminal):
        config.chmod(0o644)
        result = start(home=home)
        assert result.returncode == 1
        warning, error = result.stderr.splitlines()
        assert warning.startswith(f"evertalk: warning: {config} holds api_key"), warning
        assert error.startswith("evertalk: ") and "does not exist" in error
        assert config.stat().st_mode & 0o777 == 0o600


def test_now_goes_with_a_message_of_p(tmp_path: Path) -> None:
    result = run("--now", home=tmp_path)
    assert (result.returncode, result.stdout) == (2, "")
    assert result.stderr == "evertalk: --now goes with -p MESSAGE\n"
