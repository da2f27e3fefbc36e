"""The usage ledger: lines appended and read back, torn lines, and the sums."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from evertalk.ledger import (
    REASON_LIMIT,
    Ledger,
    Rejections,
    Totals,
    UsageRecord,
    ledger_path,
    parse_record,
    read_records,
    summarize,
)
from evertalk.providers.base import Usage
from evertalk.usage_cli import format_summary

PLUS2 = timezone(timedelta(hours=2))
MINUS5 = timezone(timedelta(hours=-5))


@pytest.fixture
def hostile_umask() -> Iterator[None]:
    old = os.umask(0o277)
    try:
        yield
    finally:
        os.umask(old)


def record(
    role: str = "turn",
    model: str = "claude-sonnet-5-5",
    usage: Usage = Usage(10, 5, 100, 20),  # noqa: B008 - frozen
    cost: float | None = 0.5,
    date: str = "2026-10-20T12:00:00.000+02:00",
    provider: str = "anthropic",
    node: str | None = None,
) -> UsageRecord:
    return UsageRecord(
        date=date,
        role=role,
        provider=provider,
        model=model,
        input=usage.input,
        output=usage.output,
        cache_read=usage.cache_read,
        cache_write=usage.cache_write,
        cost=cost,
        duration_ms=1000,
        node=node,
        reported=usage.reported,
    )


def test_records_are_appended_and_read_back(tmp_path: Path, hostile_umask: None) -> None:
    path = ledger_path(tmp_path / "home")
    when = datetime(2026, 10, 20, 23, 59, 59, 123456, tzinfo=PLUS2)
    with Ledger(path) as ledger:
        first = ledger.record(
            role="turn",
            provider="anthropic",
            model="claude-sonnet-5-5",
            usage=Usage(input=1200, output=300, cache_read=98_000, cache_write=2_000),
            cost=0.0412,
            duration_ms=5321.6,
            turn=17,
            date=when,
        )
        second = ledger.record(
            role="compaction",
            provider="openai",
            model="gpt-5.6-luna",
            usage=Usage(100, 150, 20_000, 0),
            cost=None,
            duration_ms=2100,
            node="40+8",
        )
    assert ledger.failures == 0
    assert (tmp_path / "home").stat().st_mode & 0o777 == 0o700
    assert path.stat().st_mode & 0o777 == 0o600
    lines = path.read_text().splitlines()
    assert json.loads(lines[0]) == {
        "date": "2026-10-20T23:59:59.123+02:00",
        "role": "turn",
        "provider": "anthropic",
        "model": "claude-sonnet-5-5",
        "input": 1200,
        "output": 300,
        "cache_read": 98000,
        "cache_write": 2000,
        "cost": 0.0412,
        "duration_ms": 5322,
        "turn": 17,
    }
    assert list(json.loads(lines[1])) == [
        "date",
        "role",
        "provider",
        "model",
        "input",
        "output",
        "cache_read",
        "cache_write",
        "cost",
        "duration_ms",
        "node",
    ]
    assert json.loads(lines[1])["cost"] is None
    # A date without an offset is local time, written with the local offset.
    assert datetime.fromisoformat(second.date).utcoffset() is not None
    contents = read_records(path)
    assert contents.records == [first, second] and contents.skipped == 0
    assert first.day == "2026-10-20"  # the day where the call was made, not the UTC day


def test_a_second_ledger_appends_to_the_same_file(tmp_path: Path) -> None:
    path = ledger_path(tmp_path)
    for model in ("a", "b"):
        with Ledger(path) as ledger:
            ledger.record(
                role="subagent",
                provider="p",
                model=model,
                usage=Usage(),
                cost=0,
                duration_ms=0,
            )
    assert [r.model for r in read_records(path).records] == ["a", "b"]


def test_a_torn_last_line_is_skipped_and_the_next_record_starts_a_new_line(
    tmp_path: Path,
) -> None:
    path = ledger_path(tmp_path)
    with Ledger(path) as ledger:
        ledger.record(
            role="turn", provider="p", model="m", usage=Usage(1, 1), cost=None, duration_ms=1
        )
    whole = path.read_bytes()
    with open(path, "ab") as file:
        file.write(whole[: len(whole) // 2])  # a crash in the middle of a line
    contents = read_records(path)
    assert (len(contents.records), contents.skipped) == (1, 1)
    with Ledger(path) as ledger:
        ledger.record(
            role="turn", provider="p", model="m2", usage=Usage(2, 2), cost=None, duration_ms=1
        )
    contents = read_records(path)
    assert [r.model for r in contents.records] == ["m", "m2"] and contents.skipped == 1


def test_a_record_whose_newline_was_lost_still_counts(tmp_path: Path) -> None:
    path = ledger_path(tmp_path)
    path.write_text(record().to_json())  # no newline at the end
    assert read_records(path).records == [record()]
    with Ledger(path) as ledger:
        ledger.record(role="turn", provider="p", model="m", usage=Usage(), cost=0, duration_ms=0)
    assert len(read_records(path).records) == 2


@pytest.mark.parametrize(
    "line",
    [
        "not json",
        "[1, 2]",
        '"a string"',
        "{}",
        '{"date": "2026-10-20T12:00:00+00:00"}',
        record().to_json().replace('"input":10', '"input":-1'),
        record().to_json().replace('"input":10', '"input":true'),
        record().to_json().replace('"input":10', '"input":1.5'),
        record().to_json().replace('"cost":0.5', '"cost":"free"'),
        record().to_json().replace('"cost":0.5', '"cost":-1'),
        record().to_json().replace("2026-10-20T12", "yesterday at 12"),
        record().to_json().replace('"role":"turn"', '"role":7'),
        record().to_json()[:-1] + ',"node":8}',
        record().to_json()[:-1] + ',"turn":[1]}',
        record().to_json()[:-1] + ',"reported":"no"}',
        record().to_json()[:-1] + ',"rejected":5}',
    ],
)
def test_lines_that_are_not_records_are_skipped(tmp_path: Path, line: str) -> None:
    path = ledger_path(tmp_path)
    path.write_text(record().to_json() + "\n" + line + "\n\n" + record().to_json() + "\n")
    contents = read_records(path)
    assert (len(contents.records), contents.skipped) == (2, 1)


def test_bytes_that_are_not_utf8_are_skipped() -> None:
    assert parse_record(b'{"date": "\xff"}') is None


def test_record_refuses_what_would_corrupt_the_sums(tmp_path: Path) -> None:
    ledger = Ledger(ledger_path(tmp_path))
    usage = Usage(1, 1)
    with pytest.raises(ValueError, match="role"):
        ledger.record(role="chat", provider="p", model="m", usage=usage, cost=0, duration_ms=0)
    for cost in (-0.01, float("nan"), float("inf")):
        with pytest.raises(ValueError, match="cost"):
            ledger.record(
                role="turn", provider="p", model="m", usage=usage, cost=cost, duration_ms=0
            )
    with pytest.raises(ValueError, match="token"):
        ledger.record(role="turn", provider="p", model="m", usage=Usage(-1), cost=0, duration_ms=0)
    assert not ledger_path(tmp_path).exists()


def test_a_write_that_fails_is_counted_not_raised(tmp_path: Path) -> None:
    (tmp_path / "home").write_text("a file where the folder should be")
    ledger = Ledger(ledger_path(tmp_path / "home"))
    entry = ledger.record(
        role="turn", provider="p", model="m", usage=Usage(3), cost=1.0, duration_ms=5
    )
    assert entry.input == 3
    assert ledger.failures == 1 and ledger.last_error is not None
    assert str(tmp_path / "home") in ledger.last_error


def test_concurrent_writers_never_mix_lines(tmp_path: Path) -> None:
    path = ledger_path(tmp_path)

    def write(name: str) -> None:
        with Ledger(path) as ledger:
            for k in range(300):
                ledger.record(
                    role="compaction",
                    provider="p",
                    model=name * 50,
                    usage=Usage(k, k),
                    cost=None,
                    duration_ms=k,
                    node=f"{k}+1",
                )

    threads = [threading.Thread(target=write, args=(name,)) for name in "abcd"]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    contents = read_records(path)
    assert len(contents.records) == 1200 and contents.skipped == 0


# --- the sums --------------------------------------------------------------------------------


def test_summary_arithmetic_by_hand() -> None:
    d20, d21 = "2026-10-20T", "2026-10-21T"
    records = [
        # Two turns on 2026-10-20 (local days: the second is late evening at -05:00).
        record("turn", "sonnet", Usage(100, 10, 800, 100), 0.25, d20 + "09:00:00+02:00"),
        record("turn", "sonnet", Usage(50, 20, 900, 50), 0.5, d20 + "23:30:00-05:00"),
        # Three compactions on 2026-10-21 for two nodes; one with no known price.
        record("compaction", "haiku", Usage(10, 5, 80, 10), 0.01, d21 + "08:00+02:00", node="0+2"),
        record("compaction", "haiku", Usage(10, 4, 90, 0), None, d21 + "08:01+02:00", node="0+2"),
        record("compaction", "haiku", Usage(20, 6, 70, 10), 0.02, d21 + "08:02+02:00", node="2+2"),
        # A subagent on another provider.
        record("subagent", "sonnet", Usage(5, 5), 0.125, d21 + "09:00+02:00", "openrouter"),
    ]  # fmt: skip
    summary = summarize(records)
    assert summary.total == Totals(
        calls=6,
        input=195,
        output=50,
        cache_read=1940,
        cache_write=170,
        cost=pytest.approx(0.905),  # type: ignore[arg-type]
        unpriced=1,
    )
    assert summary.by_day == {
        "2026-10-20": Totals(2, 150, 30, 1700, 150, 0.75, 0),
        "2026-10-21": Totals(4, 45, 20, 240, 20, pytest.approx(0.155), 1),  # type: ignore[arg-type]
    }
    assert list(summary.by_role) == ["turn", "compaction", "subagent"]
    assert summary.by_role["turn"] == Totals(2, 150, 30, 1700, 150, 0.75, 0)
    assert summary.by_role["compaction"] == Totals(3, 40, 15, 240, 20, 0.03, 1)
    assert summary.by_role["subagent"] == Totals(1, 5, 5, 0, 0, 0.125, 0)
    assert summary.by_model == {
        "anthropic/haiku": Totals(3, 40, 15, 240, 20, 0.03, 1),
        "anthropic/sonnet": Totals(2, 150, 30, 1700, 150, 0.75, 0),
        "openrouter/sonnet": Totals(1, 5, 5, 0, 0, 0.125, 0),
    }
    # 1940 / (195 + 1940 + 170) = 1940 / 2305
    assert summary.cache_read_share == pytest.approx(1940 / 2305)
    assert summary.by_role["turn"].cache_read_share == pytest.approx(1700 / 2000)
    assert summary.by_role["compaction"].cache_read_share == pytest.approx(240 / 300)
    assert summary.by_role["subagent"].cache_read_share == 0
    assert (summary.compaction_calls, summary.built_nodes) == (3, 2)
    assert summary.calls_per_node == 1.5


def test_an_empty_summary_has_no_shares() -> None:
    summary = summarize([])
    assert summary.total == Totals()
    assert summary.cache_read_share is None and summary.calls_per_node is None
    assert summary.by_day == summary.by_role == summary.by_model == {}


def test_a_call_with_no_prompt_has_no_share() -> None:
    summary = summarize([record(usage=Usage(0, 7, 0, 0))])
    assert summary.cache_read_share is None


def test_the_summary_as_json() -> None:
    records = [record(cost=0.1), record(cost=0.2), record("compaction", node="1+2", cost=None)]
    data = json.loads(json.dumps(summarize(records).as_dict()))
    assert data["total"]["calls"] == 3 and data["total"]["unpriced"] == 1
    assert data["total"]["cost"] == 0.3  # float noise rounded away
    assert data["by_day"]["2026-10-20"]["cache_read_share"] == pytest.approx(300 / 390)
    assert data["calls_per_node"] == 1.0 and data["built_nodes"] == 1


def test_a_failed_call_is_marked_and_counted_as_a_call(tmp_path: Path) -> None:
    path = tmp_path / "usage.jsonl"
    with Ledger(path) as ledger:
        for usage, failed in ((Usage(0, 0, 0, 2_745), True), (Usage(3, 60, 2_745, 0), False)):
            ledger.record(
                role="compaction",
                provider="anthropic",
                model="claude-haiku-5-5",
                usage=usage,
                cost=None,
                duration_ms=40,
                node="12+1",
                failed=failed,
            )
        ledger.record(
            role="compaction",
            provider="anthropic",
            model="claude-haiku-5-5",
            usage=Usage(),
            cost=None,
            duration_ms=600_000,
            node="14+1",
            failed=True,  # the deadline: it never answered, and was cut in the end
        )
    lines = path.read_text().splitlines()
    assert ['"failed":true' in line for line in lines] == [True, False, True]
    assert '"failed"' not in lines[1]  # written only when true
    records = read_records(path).records
    assert [r.failed for r in records] == [True, False, True]
    summary = summarize(records)
    assert summary.total.calls == 3 and summary.total.cache_write == 2_745
    # three calls, one node a model gave its line: the failed calls are counted, not hidden
    assert (summary.compaction_calls, summary.built_nodes, summary.calls_per_node) == (3, 1, 3.0)
    printed = format_summary(summary)
    assert "compaction" in printed and " 3 " in printed
    assert parse_record(lines[0].replace("true", '"yes"').encode()) is None


# --- usage not reported, replies rejected ---------------------------------------------------


def test_usage_not_reported_is_kept_as_such(tmp_path: Path) -> None:
    path = ledger_path(tmp_path)
    with Ledger(path) as ledger:
        for usage in (Usage(reported=False), Usage(40, 4), Usage(reported=False)):
            ledger.record(
                role="turn",
                provider="llamacpp",
                model="smollm2",
                usage=usage,
                cost=None,
                duration_ms=30,
            )
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    assert [line.get("reported") for line in lines] == [False, None, False]
    assert lines[0]["input"] == 0  # the counts stay numbers, for readers that predate the flag
    records = read_records(path).records
    assert [r.reported for r in records] == [False, True, False]
    summary = summarize(records)
    assert summary.total.unreported == 2 and summary.total.calls == 3
    assert summary.by_model["llamacpp/smollm2"].unreported == 2
    assert summarize([record()]).total.unreported == 0  # a line without the flag was reported
    assert json.loads(json.dumps(summary.as_dict()))["total"]["unreported"] == 2


def test_unreported_tokens_are_shown_unknown_not_zero() -> None:
    unknown = Usage(reported=False)
    records = [
        record("turn", "smollm2", unknown, None, provider="llamacpp"),
        record("turn", "smollm2", unknown, None, provider="llamacpp"),
        record("compaction", "claude-haiku-5-5", Usage(10, 5, 80, 0), 0.01, node="0+1"),
    ]
    lines = format_summary(summarize(records)).splitlines()
    rows = {line.split()[0]: line.split()[1:] for line in lines if line.startswith("  ")}
    assert rows["llamacpp/smollm2"] == ["2", "?", "?", "?", "?", "-", "?"]
    assert rows["turn"] == rows["llamacpp/smollm2"]
    assert rows["anthropic/claude-haiku-5-5"][:5] == ["1", "10", "5", "80", "0"]
    # a day with both: its sums are lower bounds
    assert rows["2026-10-20"][:5] == ["3", "10+", "5+", "80+", "0+"]
    # the table stays aligned: every row ends where the header does, but for a cost's mark
    # (with no trailing space where a row has none)
    table = [line for line in lines if line.startswith(("  ", "by day", "total"))]
    assert len({len(line) - line.endswith("*") for line in table}) == 1
    assert any(line.endswith("*") for line in table)
    text = "\n".join(lines)
    assert "of 90+ prompt tokens" in text
    assert "usage not reported               2 of 3 calls" in text
    everything_unknown = format_summary(summarize(records[:2]))
    assert "cache read share                 - (no call had its usage reported)" in (
        everything_unknown
    )
    assert "0 prompt tokens" not in everything_unknown


def test_a_rejected_reply_is_marked_and_rated_per_compactor_model(tmp_path: Path) -> None:
    path = ledger_path(tmp_path)
    reasons = [None, "not in its input: 4412, ~/trip.md", None, None]
    with Ledger(path) as ledger:
        for k, rejected in enumerate(reasons):
            ledger.record(
                role="compaction",
                provider="llamacpp" if k < 2 else "anthropic",
                model="smollm2" if k < 2 else "claude-haiku-5-5",
                usage=Usage(10, 5),
                cost=None,
                duration_ms=10,
                node=f"{k}+1",
                rejected=rejected,
            )
        ledger.record(
            role="turn",  # a turn on the same model is no compaction call
            provider="llamacpp",
            model="smollm2",
            usage=Usage(10, 5),
            cost=None,
            duration_ms=10,
        )
        long = ledger.record(
            role="compaction",
            provider="llamacpp",
            model="smollm2",
            usage=Usage(10, 5),
            cost=None,
            duration_ms=10,
            node="9+1",
            rejected="shares too few words\nwith its input " + "x" * 500,
        )
    assert long.rejected is not None and "\n" not in long.rejected
    assert len(long.rejected) == REASON_LIMIT and long.rejected.startswith("shares too few words")
    lines = path.read_text().splitlines()
    assert ['"rejected"' in line for line in lines] == [False, True, False, False, False, True]
    records = read_records(path).records
    assert records[1].rejected == "not in its input: 4412, ~/trip.md"
    summary = summarize(records)
    assert summary.rejections == {
        "anthropic/claude-haiku-5-5": Rejections(calls=2, rejected=0),
        "llamacpp/smollm2": Rejections(calls=3, rejected=2),
    }
    assert summary.rejections["llamacpp/smollm2"].rate == pytest.approx(2 / 3)
    # a rejected reply built no node: nodes 1+1 and 9+1 are not built by these calls
    assert (summary.compaction_calls, summary.built_nodes) == (5, 3)
    data = json.loads(json.dumps(summary.as_dict()))
    assert data["rejections"]["llamacpp/smollm2"] == {
        "calls": 3,
        "rejected": 2,
        "rate": pytest.approx(2 / 3),
    }
    printed = format_summary(summary).splitlines()
    assert "rejected compaction replies      66.7% (2 of 3 calls) llamacpp/smollm2" in printed
    assert "rejected compaction replies      0.0% (0 of 2 calls) anthropic/claude-haiku-5-5" in (
        printed
    )


def test_an_empty_reason_still_marks_a_rejection(tmp_path: Path) -> None:
    with Ledger(ledger_path(tmp_path)) as ledger:
        entry = ledger.record(
            role="compaction",
            provider="p",
            model="m",
            usage=Usage(1, 1),
            cost=None,
            duration_ms=1,
            rejected=" \n ",
        )
    assert entry.rejected
    assert read_records(ledger_path(tmp_path)).records[0].rejected == entry.rejected
