"""`evertalk "message"` in a real terminal (tmux): the app opens and sends the message, as
`claude "…"` does; without a terminal, or with the message split into words, one line says
what to do instead."""

from __future__ import annotations

import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from test_tui_tmux import environment, terminal, wait_for_file
from tui_support import log_of, script, write_config

from fakes import AnthropicFake, serve
from fakes import chat as answer
from served_home import run as run_evertalk

QUESTION = "what does the rotation keep?"
REPLY = "Four compressed files, weekly."


@pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")
def test_the_message_on_the_command_line_is_sent_once_the_app_opens(tmp_path: Path) -> None:
    fake = AnthropicFake(script().push(answer(REPLY)))
    home = tmp_path / "home"
    done = tmp_path / "exit-status"
    env = environment(home)
    run = (
        f"{shlex.quote(sys.executable)} -m evertalk {shlex.quote(QUESTION)}; "
        f"echo $? > {shlex.quote(str(done))}"
    )
    with serve(fake.app) as url, terminal(env) as term:
        write_config(home, base_url=url)
        term.start(f"cd {shlex.quote(str(home))} && {run}")
        screen = term.wait_for(lambda s: REPLY in s and "working" not in s, "the reply")
        assert QUESTION in screen
        term.keys("C-d")
        assert wait_for_file(done) == "0"
    assert log_of(home) == [("user", QUESTION), ("ever", REPLY)]


def run(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """`evertalk ARGS` with no terminal, in the environment the terminal tests give."""
    return run_evertalk(home, *args, env=environment(home))


def test_without_a_terminal_it_says_to_use_p(home: Path) -> None:
    result = run(home, QUESTION)
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr.splitlines() == [
        "evertalk: a message alone opens the app, which needs a terminal: "
        "evertalk -p MESSAGE answers without it"
    ]
    assert not (home / "chat").exists()  # nothing was sent, nothing opened


def test_a_message_split_into_words_is_one_line(home: Path) -> None:
    result = run(home, "fix", "the", "bug")
    assert result.returncode == 2
    assert result.stderr == "evertalk: the message goes as one argument: put it in quotes\n"


def test_a_command_name_is_still_a_command(home: Path) -> None:
    result = run(home, "usage")
    assert result.returncode == 0 and "No model calls" in result.stdout, result.stderr
    # with `--`, the word is a message
    result = run(home, "--", "usage")
    assert result.returncode == 2 and "needs a terminal" in result.stderr
