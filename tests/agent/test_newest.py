"""The newest messages a turn on a chat that is behind reads whole after the view."""

from __future__ import annotations

from evertalk.agent.newest import INTRO, newest_block, runs, unsummarized
from evertalk.store.records import MessageRecord


def record(i: int, text: str, kind: str = "user") -> MessageRecord:
    return MessageRecord(i, kind, text, len(text.encode()), "2026-10-01T09:00:00+02:00")


def test_whole_messages_newest_first_within_the_budget_shown_oldest_first() -> None:
    records = [record(9, "nine"), record(8, "x" * 500), record(7, "seven"), record(6, "six")]
    block = newest_block(records, len(INTRO) + 60)
    shown = ["6+1|user: six", "7+1|user: seven", "9+1|user: nine", "</newest>"]
    assert block.splitlines()[2:] == shown
    assert "x" * 500 not in block and "8+1" not in block  # too long: left out, not cut
    assert len(block.encode()) <= len(INTRO) + 60


def test_nothing_fits_gives_nothing() -> None:
    assert newest_block([record(1, "y" * 100)], 50) == ""


def test_the_ids_under_unbuilt_lines_newest_first() -> None:
    built = {(2, 0), (0, 6)}
    lines = [(2, 0), (0, 4), (0, 5), (0, 6), (1, 4)]
    ids = unsummarized(lines, built.__contains__)
    assert ids == [9, 8, 5, 4]
    assert runs(ids) == [(8, 10), (4, 6)]
