"""The checker (harness.py): three machines on a real PostgreSQL through faults.
`make chaos` runs seeds 0 … CHAOS_SEEDS-1, each schedule CHAOS_STEPS long, and prints the table."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from harness import Report, run_schedule, table

from pg_server import PgServer

SEEDS = range(int(os.environ.get("CHAOS_SEEDS", "3")))
STEPS = int(os.environ.get("CHAOS_STEPS", "20"))
REPORTS: list[Report] = []


@pytest.mark.parametrize("seed", SEEDS)
def test_every_copy_keeps_the_laws(tmp_path: Path, own_server: PgServer, seed: int) -> None:
    database = own_server.create_database(f"chaos_{seed}")
    report = run_schedule(tmp_path, own_server, database, seed, STEPS)
    REPORTS.append(report)
    assert report.violations == [], table([report])


def test_the_same_seed_draws_the_same_schedule() -> None:
    from harness import schedule

    assert schedule(7, 30) == schedule(7, 30) and schedule(7, 30) != schedule(8, 30)


def test_the_checker_finds_two_turns_mixed() -> None:
    from harness import interleaved

    def rows(*texts: str) -> list[tuple[object, ...]]:
        return [(i, "user", text, None) for i, text in enumerate(texts)]

    def append(first: int, epoch: int | None) -> tuple[object, ...]:
        what: dict[str, object] = {"append": [first, 1]}
        return ("m", what | ({} if epoch is None else {"epoch": epoch}))

    apart = [append(0, 1), append(1, 1), append(2, None), append(3, 2), append(4, 2)]
    assert interleaved(rows("turn 0", "ok", "note 1", "turn 2", "ok"), apart) == []
    noted = [append(0, 1), append(1, None), append(2, 1)]  # a note may come in between
    assert interleaved(rows("turn 0", "note 1", "ok"), noted) == []
    mixed = [append(0, 1), append(1, 2), append(2, 1), append(3, 2)]
    assert interleaved(rows("turn 0", "turn 1", "ok", "ok"), mixed) == [
        "turn 1 (messages 0-2) has turn 2's records inside",
        "turn 2 (messages 1-3) has turn 1's records inside",
    ]
    unfenced = [append(0, None)]
    assert interleaved(rows("turn 0"), unfenced) == [
        "message 0 (turn 0) was logged outside any turn"
    ]


@pytest.mark.parametrize("seed", SEEDS)
def test_windows_follow_one_home_through_stops(tmp_path: Path, seed: int) -> None:
    from files import run_file_schedule

    report = run_file_schedule(tmp_path, seed, STEPS)
    REPORTS.append(report)
    assert report.violations == [], table([report])
