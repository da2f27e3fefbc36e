"""Errors a new user meets on the command line, each one line that says what to do."""

from __future__ import annotations

from pathlib import Path

from test_cli import run

RETRY_ERROR = "evertalk: --retry takes no MESSAGE: it sends the last unanswered one again\n"


def test_retry_with_a_message_says_retry_takes_none(tmp_path: Path) -> None:
    for args in (["-p", "--retry", "msg"], ["--retry", "-p", "msg"], ["-p", "msg", "--retry"]):
        result = run(*args, home=tmp_path)
        assert (result.returncode, result.stdout, result.stderr) == (2, "", RETRY_ERROR), args
