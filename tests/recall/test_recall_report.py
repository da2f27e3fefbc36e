"""The recall benchmark's report: the table, the JSON object and the SVG chart of recall by
age, from answers made up here (SPEC §14)."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from evertalk.cli import main
from evertalk.ledger import UsageRecord
from evertalk.recall.chart import recall_by_age_svg
from evertalk.recall.report import Answer, Report, Spend


def answer(number: int, kind: str, age: int, outcome: str, zooms: int = 0) -> Answer:
    return Answer(number, kind, age, f"q{number}?", "v", "said", outcome, zooms)  # type: ignore[arg-type]


def record(cache_read: int, input_: int, cost: float | None) -> UsageRecord:
    return UsageRecord(
        "2026-03-02T09:00:00+00:00", "turn", "anthropic", "m", input_, 10, cache_read, 0, cost, 5
    )


def made_up() -> Report:
    report = Report("0.1.0", 7, 500, 4, "anthropic", "big", "small", 128_000)
    report.evertalk.answers = [
        answer(1, "number", 3, "right", 0),
        answer(2, "name", 40, "right", 2),
        answer(3, "number", 300, "missed", 4),
        answer(4, "correction", 300, "stale", 6),
    ]
    report.baseline.answers = [
        answer(1, "number", 3, "right"),
        answer(2, "name", 40, "missed"),
        answer(3, "number", 300, "missed"),
        answer(4, "correction", 300, "missed"),
    ]
    report.asking = Spend.of([record(900, 100, 0.5), record(0, 1000, None)])
    return report


def test_the_table_sets_both_side_by_side_by_age_and_kind() -> None:
    lines = made_up().table()
    assert any(line.split()[:3] == ["recall", "2/4", "50%"] and "1/4" in line for line in lines)
    assert any("age 256-1023" in line and "0/2" in line for line in lines)
    assert any("kind number" in line and "1/2" in line for line in lines)
    assert any(line.startswith("zooms per question") and "3.0" in line for line in lines)
    assert any(line.startswith("asking") and "price unknown" in line for line in lines)
    assert any("seed 7" in line and "evertalk 0.1.0" in line for line in lines)


def test_the_json_holds_every_answer_and_the_costs() -> None:
    data = made_up().to_json()
    assert data["evertalk"]["recall"] == 0.5 and data["baseline"]["recall"] == 0.25
    assert data["evertalk"]["by_age"]["256-1023"] == {"right": 0, "asked": 2, "recall": 0.0}
    assert [a["outcome"] for a in data["evertalk"]["answers"]] == [
        "right",
        "right",
        "missed",
        "stale",
    ]
    assert data["cost"]["asking"]["cache_share"] == 900 / 2000
    assert data["cost"]["asking"]["cost"] is None  # one price unknown: the sum is unknown


def test_the_chart_has_a_bar_per_side_and_age() -> None:
    svg = recall_by_age_svg(made_up())
    root = ET.fromstring(svg)
    titles = [t.text for t in root.iter("{http://www.w3.org/2000/svg}title")]
    assert titles == [
        "evertalk 1-15: 1/1",
        "baseline 1-15: 1/1",
        "evertalk 16-63: 1/1",
        "baseline 16-63: 0/1",
        "evertalk 256-1023: 0/2",
        "baseline 256-1023: 0/2",
    ]


@pytest.mark.parametrize(
    ("words", "said"),
    [
        (["--messages", "20", "--facts", "8"], "--messages must be at least 6 per fact"),
        (["--facts", "0"], "--facts must be at least 1"),
        (["--baseline-bytes", "0"], "--baseline-bytes must be at least 1"),
    ],
)
def test_bad_figures_are_one_line_before_anything_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], words: list[str], said: str
) -> None:
    assert main(["--home", str(tmp_path / "home"), "bench", "recall", *words]) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and said in err
    assert not (tmp_path / "home").exists()


def test_bench_needs_what_to_measure(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench"]) == 2
    assert "bench: say what to measure: recall" in capsys.readouterr().err
