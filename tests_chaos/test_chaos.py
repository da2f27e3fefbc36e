"""The checker (harness.py): three machines on a real PostgreSQL through faults.
`make chaos` runs seeds 0 … CHAOS_SEEDS-1, each schedule CHAOS_STEPS long, and prints the table."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from harness import Report, run_schedule, table

from pg_server import PgServer

SEEDS = range(int(os.environ.get("CHAOS_SEEDS", "2")))
STEPS = int(os.environ.get("CHAOS_STEPS", "24"))
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
