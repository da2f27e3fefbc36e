"""Sums of the ledger read as it grows: a window's spending (the calls appended while it was
open) and the day's (the calls dated today), each read incrementally."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from evertalk.ledger import DaySpending, Ledger, LedgerTally
from evertalk.providers.base import Usage

ZONE = timezone(timedelta(hours=2))


def spend(ledger: Ledger, cost: float, when: datetime) -> None:
    ledger.record(
        role="turn",
        provider="anthropic",
        model="m",
        usage=Usage(10, 5),
        cost=cost,
        duration_ms=1,
        date=when,
    )


def test_a_window_counts_the_calls_made_while_it_was_open(tmp_path: Path) -> None:
    path = tmp_path / "usage.jsonl"
    now = datetime(2026, 10, 8, 12, tzinfo=ZONE)
    with Ledger(path) as ledger:
        spend(ledger, 1.0, now)
        window = LedgerTally.from_now(path)
        spend(ledger, 0.25, now)
        assert window.read() == pytest.approx(0.25)
        spend(ledger, 0.5, now)
        with path.open("ab") as file:
            file.write(b'{"date":"2026-10-08T12:00')  # a line being written: not yet
        assert window.read() == pytest.approx(0.75)


def test_a_window_opened_before_the_first_call_counts_them_all(tmp_path: Path) -> None:
    path = tmp_path / "usage.jsonl"
    window = LedgerTally.from_now(path)
    assert window.read() == 0.0
    with Ledger(path) as ledger:
        spend(ledger, 0.5, datetime(2026, 10, 8, 12, tzinfo=ZONE))
    assert window.read() == pytest.approx(0.5)


def test_the_day_counts_todays_calls_only_and_starts_again_at_midnight(tmp_path: Path) -> None:
    path = tmp_path / "usage.jsonl"
    today = ["2026-10-08"]
    with Ledger(path) as ledger:
        for hour in range(24):
            spend(ledger, 1.0, datetime(2026, 10, 7, hour, tzinfo=ZONE))
        spend(ledger, 0.5, datetime(2026, 10, 8, 9, tzinfo=ZONE))
        day = DaySpending(path, today=lambda: today[0])
        assert day.cost() == pytest.approx(0.5)
        spend(ledger, 0.25, datetime(2026, 10, 8, 10, tzinfo=ZONE))
        assert day.cost() == pytest.approx(0.75)
        today[0] = "2026-10-09"
        assert day.cost() == 0.0
        spend(ledger, 2.0, datetime(2026, 10, 9, 0, 5, tzinfo=ZONE))
        assert day.cost() == pytest.approx(2.0)


def test_the_days_first_line_is_found_across_chunks(tmp_path: Path) -> None:
    path = tmp_path / "usage.jsonl"
    with Ledger(path) as ledger:
        for minute in range(1500):  # about 300 KB: several chunks back
            spend(ledger, 0.001, datetime(2026, 10, 7, 23, tzinfo=ZONE) + timedelta(seconds=minute))
        for minute in range(700):
            spend(ledger, 0.01, datetime(2026, 10, 8, 1, tzinfo=ZONE) + timedelta(minutes=minute))
    day = DaySpending(path, today=lambda: "2026-10-08")
    assert day.cost() == pytest.approx(7.0)
    assert day._tally is not None and day._tally.calls == 700
