"""End to end as a user: `evertalk` in a real terminal (tmux) against the fake on loopback.

The test types messages and a slash command with `tmux send-keys`, reads the screen with
`tmux capture-pane` until each reply (or the command's output) shows, quits with Ctrl+D, and
checks the exit status and the log. A second `evertalk` on the same chat, in a terminal of its
own, attaches to the same service: it shows what the first one did, and a message sent in it
(or by `evertalk -p` meanwhile) shows, with its reply, in both.
Each test runs its own tmux server (a unique socket), always killed at the end.
"""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from tui_support import API_KEY, log_of, script, write_config

from evertalk.chat import Chat
from fakes import AnthropicFake, serve, slow
from fakes import chat as answer

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed")

CLEAN = ("EVERTALK_", "ANTHROPIC_", "OPENAI_", "OPENROUTER_", "TMUX")
REPLY = "The log rotates weekly: see /etc/logrotate.d/notes."
QUESTION = "where does the log rotate?"
REPLY_2 = "Four old files are kept, compressed."
QUESTION_2 = "and how many are kept?"
REPLY_3 = "Noted for the next rotation."
QUESTION_3 = "keep eight from now on"
WAIT = 20.0  # seconds, at most, for anything to show


def environment(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(CLEAN)}
    env["EVERTALK_HOME"] = str(home)
    env["TERM"] = "xterm-256color"
    env["EDITOR"] = "true"
    return env


class Terminal:
    """One tmux server with one 120×40 session running a command."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env
        self.base = ["tmux", "-L", f"evertalk-test-{uuid.uuid4().hex[:12]}", "-f", "/dev/null"]

    def tmux(self, *args: str) -> str:
        result = subprocess.run(
            [*self.base, *args], env=self.env, capture_output=True, text=True, timeout=10
        )
        return result.stdout

    def start(self, command: str) -> None:
        self.tmux("new-session", "-d", "-s", "main", "-x", "120", "-y", "40", command)

    def screen(self) -> str:
        return self.tmux("capture-pane", "-p", "-t", "main")

    def keys(self, *keys: str, literal: bool = False) -> None:
        self.tmux("send-keys", "-t", "main", *(["-l"] if literal else []), *keys)

    def send(self, line: str) -> None:
        """Type a line into the input and press Enter."""
        self.keys(line, literal=True)
        self.keys("Enter")

    def wait_for(self, ready: Callable[[str], bool], what: str) -> str:
        deadline = time.monotonic() + WAIT
        while True:
            screen = self.screen()
            if ready(screen):
                return screen
            if time.monotonic() > deadline:
                raise AssertionError(f"no {what} on the screen after {WAIT} s:\n{screen}")
            time.sleep(0.1)

    def kill(self) -> None:
        subprocess.run([*self.base, "kill-server"], env=self.env, capture_output=True, timeout=10)


@contextmanager
def terminal(env: dict[str, str]) -> Iterator[Terminal]:
    term = Terminal(env)
    try:
        yield term
    finally:
        term.kill()


def wait_for_file(path: Path) -> str:
    deadline = time.monotonic() + WAIT
    while not (path.exists() and path.read_text().strip()):
        if time.monotonic() > deadline:
            raise AssertionError(f"{path} was not written in {WAIT} s")
        time.sleep(0.1)
    return path.read_text().strip()


def idle(screen: str) -> bool:
    """The status bar no longer says a turn works."""
    return "working" not in screen


def test_a_session_in_a_real_terminal(tmp_path: Path) -> None:
    fake = AnthropicFake(
        script().push(
            slow(0.2, answer(REPLY), chunk_delay=0.05),
            slow(0.2, answer(REPLY_2), chunk_delay=0.05),
        )
    )
    home = tmp_path / "home"
    done = tmp_path / "exit-status"
    env = environment(home)
    run = f"{shlex.quote(sys.executable)} -m evertalk; echo $? > {shlex.quote(str(done))}"
    done_2 = tmp_path / "exit-status-2"
    run_2 = f"{shlex.quote(sys.executable)} -m evertalk; echo $? > {shlex.quote(str(done_2))}"
    fake.behaviour.push(answer(REPLY_3))  # type: ignore[attr-defined]
    with serve(fake.app) as url, terminal(env) as term, terminal(env) as term_2:
        write_config(home, base_url=url)
        term.start(f"cd {shlex.quote(str(home))} && {run}")
        term.wait_for(lambda s: "mem 0B/128K" in s and "A new chat" in s, "ready app")

        term.send(QUESTION)
        screen = term.wait_for(lambda s: REPLY in s, "reply")
        assert QUESTION in screen
        term.wait_for(idle, "end of the first turn")

        # a second window on the same chat: it shows what the first one did
        term_2.start(f"cd {shlex.quote(str(home))} && {run_2}")
        screen = term_2.wait_for(lambda s: REPLY in s and "2 messages in this chat" in s, "2nd")
        assert QUESTION in screen

        term_2.send(QUESTION_2)  # sent in the second, shown with its reply in both
        for window in (term_2, term):
            screen = window.wait_for(lambda s: REPLY_2 in s and idle(s), "second reply")
            for text in (QUESTION, REPLY, QUESTION_2):  # the first exchange is still on screen
                assert text in screen, text
        print(screen)  # shown with -s: what a user sees

        said = subprocess.run(
            [sys.executable, "-m", "evertalk", "-p", QUESTION_3],
            env=env,
            cwd=home,
            capture_output=True,
            text=True,
            timeout=WAIT,
        )
        assert (said.returncode, said.stdout) == (0, REPLY_3 + "\n"), said.stderr
        for window in (term, term_2):
            window.wait_for(lambda s: QUESTION_3 in s and REPLY_3 in s, "the -p exchange")

        term.send("/memory")
        screen = term.wait_for(lambda s: "compactor summarizing" in s, "/memory output")
        assert "messages  6" in screen  # the status under the view: the three exchanges

        term_2.keys("C-d")
        assert wait_for_file(done_2) == "0"
        term.keys("C-d")
        assert wait_for_file(done) == "0"
    assert log_of(home) == [
        ("user", QUESTION),
        ("ever", REPLY),
        ("user", QUESTION_2),
        ("ever", REPLY_2),
        ("user", QUESTION_3),
        ("ever", REPLY_3),
    ]


def test_the_first_run_sets_up_a_provider_then_opens_the_chat(tmp_path: Path) -> None:
    fake = AnthropicFake(script().push(answer(REPLY)))
    home = tmp_path / "home"  # no config, no key variable: the setup form comes first
    done = tmp_path / "exit-status"
    env = environment(home)
    key = "sk-ant-typed-in-the-form-42"
    run = f"{shlex.quote(sys.executable)} -m evertalk; echo $? > {shlex.quote(str(done))}"
    with serve(fake.app) as url, terminal(env) as term:
        term.start(f"cd {shlex.quote(str(tmp_path))} && {run}")
        term.wait_for(lambda s: "Welcome to evertalk" in s and "API key" in s, "setup form")
        term.keys("Tab", "Tab")  # from the provider to the key; the model stays the default
        time.sleep(0.3)  # a focus change is not typed ahead
        term.keys(key, literal=True)
        term.keys("Tab")
        time.sleep(0.3)
        term.keys(url, literal=True)  # the fake stands for a proxy
        term.keys("C-s")
        term.wait_for(lambda s: "mem 0B/128K" in s, "chat after the setup")
        assert (home / "config.toml").stat().st_mode & 0o777 == 0o600
        saved = (home / "config.toml").read_text()
        assert f'api_key = "{key}"' in saved and f'base_url = "{url}"' in saved

        term.keys("hello", literal=True)
        term.keys("Enter")
        term.wait_for(lambda s: "The log rotates weekly" in s, "reply")
        term.keys("C-d")
        assert wait_for_file(done) == "0"
    assert log_of(home) == [("user", "hello"), ("ever", REPLY)]


# A message that would clear the screen and retitle the window if it reached the terminal raw.
HOSTILE = "clear\x1b[2J\x1b]0;pwned\x07 and \x9b6n"


def test_an_open_config_is_made_private_and_escapes_stay_inert(tmp_path: Path) -> None:
    home = tmp_path / "home"
    done = tmp_path / "exit-status"
    env = environment(home)
    with Chat.open(home / "chat") as chat:
        chat.append("user", f"print {HOSTILE}")
        chat.append("ever", f"It printed {HOSTILE}")
    run = f"{shlex.quote(sys.executable)} -m evertalk; echo $? > {shlex.quote(str(done))}"
    with serve(AnthropicFake(script()).app) as url, terminal(env) as term:
        write_config(home, base_url=url)
        config = home / "config.toml"
        config.chmod(0o644)
        term.start(f"cd {shlex.quote(str(home))} && {run}")
        screen = term.wait_for(lambda s: "mem " in s and "It printed" in s, "the app")
        # the warning wraps, a long path even in the middle of a name
        letters = "".join(screen.split())
        warning = f"warning: {config} holds api_key and was open to other users (mode 0644)"
        assert letters.count("".join(warning.split())) == 1, screen
        assert API_KEY not in screen
        assert "It printed clear\\x1b[2J\\x1b]0;pwned\\x07 and \\x9b6n" in screen, screen
        assert "pwned" not in term.tmux("display-message", "-p", "-t", "main", "#{pane_title}")
        term.keys("C-d")
        assert wait_for_file(done) == "0"
    assert config.stat().st_mode & 0o777 == 0o600
