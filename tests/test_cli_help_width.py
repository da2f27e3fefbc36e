"""Help and usage are laid out as argparse lays them out, at the width argparse would find, though
the command line finds that width without loading shutil (`cli._Formatter`)."""

from __future__ import annotations

import argparse
import fcntl
import os
import shutil
import struct
import sys
import termios
from collections.abc import Iterator

import pytest

from evertalk.cli import build_parser, terminal_columns


@pytest.mark.parametrize("columns", [None, "100", "37", "0", "-3", "wide", ""])
def test_the_width_is_the_one_shutil_gives(
    monkeypatch: pytest.MonkeyPatch, columns: str | None
) -> None:
    if columns is None:
        monkeypatch.delenv("COLUMNS", raising=False)
    else:
        monkeypatch.setenv("COLUMNS", columns)
    assert terminal_columns() == shutil.get_terminal_size().columns


@pytest.mark.parametrize("lines", [None, "50"])
def test_the_width_of_a_terminal_is_the_one_shutil_gives(
    monkeypatch: pytest.MonkeyPatch, lines: str | None
) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    if lines is None:
        monkeypatch.delenv("LINES", raising=False)
    else:
        monkeypatch.setenv("LINES", lines)
    controller, terminal = os.openpty()
    try:
        fcntl.ioctl(terminal, termios.TIOCSWINSZ, struct.pack("HHHH", 30, 123, 0, 0))
        with os.fdopen(terminal, "w", closefd=False) as stdout, monkeypatch.context() as patch:
            patch.setattr(sys, "__stdout__", stdout)
            assert terminal_columns() == shutil.get_terminal_size().columns == 123
            patch.setattr(sys, "__stdout__", None)
            assert terminal_columns() == shutil.get_terminal_size().columns == 80
    finally:
        os.close(terminal)
        os.close(controller)


def every_parser(parser: argparse.ArgumentParser) -> Iterator[argparse.ArgumentParser]:
    yield parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                yield from every_parser(sub)


@pytest.mark.parametrize("columns", ["50", "80", "132", "200"])
def test_help_and_usage_read_as_argparses_own(
    monkeypatch: pytest.MonkeyPatch, columns: str
) -> None:
    monkeypatch.setenv("COLUMNS", columns)
    ours = list(every_parser(build_parser()))
    theirs = list(every_parser(build_parser()))
    for parser in theirs:
        parser.formatter_class = argparse.HelpFormatter
    assert len(ours) > 20
    assert [(p.format_help(), p.format_usage()) for p in ours] == [
        (p.format_help(), p.format_usage()) for p in theirs
    ]
