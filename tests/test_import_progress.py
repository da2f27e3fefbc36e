"""`evertalk import`'s progress line: never more done than the total, and on a terminal within its
width, the bar taking what the words leave."""

from __future__ import annotations

import re

from evertalk.import_cli import BAR_MOST, progress_line

WORDS = "summaries to build 12 · $0.0031 spent on summaries · about 2 min left"


def bar_of(line: str) -> str:
    found = re.match(r"\[([#-]*)\] ", line)
    assert found is not None, line
    return found.group(1)


def test_more_done_than_the_total_shows_the_total() -> None:
    line = progress_line(3_497, 27, WORDS, 200)
    assert "27/27 messages" in line and "3,497" not in line
    assert bar_of(line) == "#" * BAR_MOST


def test_the_bar_takes_what_the_words_leave_of_the_terminal() -> None:
    for columns in (200, 120, 110, 100, 80, 40, 10, 1):
        line = progress_line(13, 27, WORDS, columns)
        assert len(line) <= max(columns - 1, 1), (columns, line)
    assert len(bar_of(progress_line(13, 27, WORDS, 200))) == BAR_MOST
    narrow = progress_line(13, 27, WORDS, 105)
    assert 5 <= len(bar_of(narrow)) < BAR_MOST and len(narrow) == 104
    assert progress_line(13, 27, WORDS, 80).startswith("13/27 messages · ")  # no room: no bar


def test_a_log_gets_the_whole_line() -> None:
    line = progress_line(0, 27, WORDS)
    assert bar_of(line) == "-" * BAR_MOST and line.endswith(WORDS)
    assert progress_line(0, 0, "done").startswith(f"[{'#' * BAR_MOST}] 0/0 messages")
