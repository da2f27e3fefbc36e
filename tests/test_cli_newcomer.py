"""Errors a new user meets on the command line, each one line that says what to do."""

from __future__ import annotations

from pathlib import Path

from test_cli import run

RETRY_ERROR = "evertalk: --retry takes no MESSAGE: it sends the last unanswered one again\n"


def test_retry_with_a_message_says_retry_takes_none(tmp_path: Path) -> None:
    for args in (["-p", "--retry", "msg"], ["--retry", "-p", "msg"], ["-p", "msg", "--retry"]):
        result = run(*args, home=tmp_path)
        assert (result.returncode, result.stdout, result.stderr) == (2, "", RETRY_ERROR), args


def test_a_word_that_names_a_command_asks_before_it_becomes_a_paid_message(
    tmp_path: Path,
) -> None:
    for word, command in (
        ("browse", "memory browse"),
        ("memroy", "memory"),
        ("stop", "service stop"),
    ):
        result = run(word, home=tmp_path)
        assert result.returncode == 2 and result.stdout == ""
        assert result.stderr == (
            f"evertalk: did you mean `evertalk {command}`? "
            f"Send it as a message with `evertalk -- {word}`\n"
        )
    assert not (tmp_path / "chat").exists()  # nothing was sent, nothing opened


def test_after_two_dashes_the_word_is_the_message() -> None:
    from evertalk.cli import build_parser
    from evertalk.cli_message import split_message

    assert split_message(build_parser(), ["--", "browse"]) == ([], "browse")
    assert split_message(build_parser(), ["browse the docs"]) == ([], "browse the docs")
