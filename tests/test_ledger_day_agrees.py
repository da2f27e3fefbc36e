"""The day's cost the status bar shows (`DaySpending`, which `evertalk usage`'s budget line reads
too) and the day's row of `evertalk usage`'s table (`summarize`) count the same calls, so that
they say the same figure: also when a process in another time zone wrote a line of its own
earlier day after lines of today (its offset dates it: `UsageRecord.day`)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path

from evertalk.budget import dollars
from evertalk.ledger import DaySpending, Ledger, read_records, summarize
from evertalk.providers.base import Usage

HERE = timezone(timedelta(hours=1))  # the service's zone; a `-p` run from a UTC shell writes too


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


def test_the_bar_and_the_usage_table_count_the_same_calls_of_a_day(tmp_path: Path) -> None:
    path = tmp_path / "usage.jsonl"
    with Ledger(path) as ledger:  # in the order they were made
        spend(ledger, 1.0, datetime(2026, 10, 7, 21, 0, tzinfo=UTC))
        spend(ledger, 0.03, datetime(2026, 10, 8, 0, 10, tzinfo=HERE))
        spend(ledger, 0.01, datetime(2026, 10, 7, 23, 15, tzinfo=UTC))  # a UTC shell: the 7th
        spend(ledger, 0.03, datetime(2026, 10, 8, 0, 20, tzinfo=HERE))
    table = summarize(read_records(path).records).by_day["2026-10-08"]
    bar = DaySpending(path, today=lambda: "2026-10-08").cost()
    assert dollars(bar) == dollars(table.cost) == "$0.06"
