"""`evertalk -p` with its standard output on a terminal (a pty), as a user runs it: a reply that
quotes escape sequences (a window title, a clear screen) shows them escaped, unless `--raw`
asks for them as they are (issue 34)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from test_turn_support import workdir_beside

from fakes import AnthropicFake, ToolCall, reply
from fakes import chat as answer
from served_home import environment, evertalk, fake, home, run

__all__ = ["fake", "home"]  # the fixtures, used by name

TITLE_AND_CLEAR = "\x1b]0;TITLE\x07\x1b[2J"
SHELL_PRINTS = "printf '\\033]0;TITLE\\007\\033[2J'"


def on_a_terminal(home: Path, *args: str) -> tuple[int, bytes, str]:
    """`evertalk ARGS` with its standard output on a pty: the exit status, what reached the
    terminal, and standard error."""
    leader, follower = os.openpty()
    try:
        process = subprocess.Popen(
            evertalk(*args),
            stdin=subprocess.DEVNULL,
            stdout=follower,
            stderr=subprocess.PIPE,
            env=environment(home),
            cwd=workdir_beside(home),
        )
        os.close(follower)
        follower = -1
        shown = b""
        while chunk := _read(leader):
            shown += chunk
        _, err = process.communicate(timeout=60)
    finally:
        os.close(leader)
        if follower >= 0:
            os.close(follower)
    return process.returncode, shown, err.decode()


def _read(descriptor: int) -> bytes:
    try:
        return os.read(descriptor, 65536)
    except OSError:  # EIO: every writer closed the terminal, the command is over
        return b""


def quoting_the_tool(fake: AnthropicFake) -> None:
    fake.behaviour.push(  # type: ignore[attr-defined]
        reply(ToolCall("shell", {"command": SHELL_PRINTS})),
        answer(f"The command printed {TITLE_AND_CLEAR} and nothing else."),
    )


def test_a_reply_on_a_terminal_shows_escape_sequences_escaped(
    home: Path, fake: AnthropicFake
) -> None:
    quoting_the_tool(fake)
    status, shown, err = on_a_terminal(home, "-p", "run it", "--allow", "shell")
    assert status == 0, err
    assert b"\x1b" not in shown and b"\x07" not in shown, shown
    assert b"The command printed \\x1b]0;TITLE\\x07\\x1b[2J and nothing else." in shown, shown


def test_raw_keeps_the_escape_sequences_on_a_terminal(home: Path, fake: AnthropicFake) -> None:
    quoting_the_tool(fake)
    status, shown, err = on_a_terminal(home, "-p", "run it", "--allow", "shell", "--raw")
    assert status == 0, err
    assert f"The command printed {TITLE_AND_CLEAR} and".encode() in shown, shown


def test_raw_goes_with_p_alone(home: Path) -> None:
    for args in (("--raw",), ("-p", "hi", "--json", "--raw")):
        result = run(home, *args)
        assert result.returncode == 2 and result.stdout == "", result.stderr
        (line,) = result.stderr.splitlines()
        assert line.startswith("evertalk: ") and "--raw" in line, line
