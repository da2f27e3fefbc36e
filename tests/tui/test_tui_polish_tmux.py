"""In a real terminal (tmux): the window shows the folder its tools work in, and once it is
left, the terminal keeps one line of what the session cost (issue 15, item 11)."""

from __future__ import annotations

import shlex
import shutil
import sys
from pathlib import Path

import pytest
from test_tui_tmux import environment, idle, terminal, wait_for_file
from tui_support import script, write_config

from evertalk.tui.app import folder_shown
from fakes import AnthropicFake, serve
from fakes import chat as answer

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")


def test_the_folder_shows_and_the_cost_is_said_on_exit(tmp_path: Path) -> None:
    fake = AnthropicFake(script().push(answer("Hello there.")))
    home, project = tmp_path / "home", tmp_path / "project"
    project.mkdir()
    done = tmp_path / "exit-status"
    env = environment(home)
    # the shell stays after the app, so that the screen can be read once it has gone
    run = f"{shlex.quote(sys.executable)} -m evertalk; echo $? > {shlex.quote(str(done))}"
    with serve(fake.app) as url, terminal(env) as term:
        write_config(home, base_url=url)
        term.start(f"cd {shlex.quote(str(project))} && {run}; sleep 60")
        screen = term.wait_for(lambda s: "A new chat" in s and "mem 0B" in s, "ready app")
        assert folder_shown(project) in screen

        term.send("hello")
        term.wait_for(lambda s: "Hello there." in s, "reply")
        term.wait_for(idle, "end of the turn")
        term.keys("C-d")
        assert wait_for_file(done) == "0"
        screen = term.wait_for(lambda s: "this session:" in s, "the line said on exit")
        line = next(line for line in screen.splitlines() if line.startswith("this session:"))
        assert line.startswith("this session: 1 message sent; the chat spent $"), line
        assert line.endswith(" meanwhile (any window's turns, subagents, summaries)"), line
