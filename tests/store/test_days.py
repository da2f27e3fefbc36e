"""Day files and dates (SPEC §1.1, §1.2)."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

from evertalk.store.days import day_file_name, iso, list_day_files, local_now


def test_iso_has_seconds_and_offset() -> None:
    dt = datetime(2026, 10, 8, 14, 3, 22, 123456, tzinfo=timezone(timedelta(hours=2)))
    assert iso(dt) == "2026-10-08T14:03:22+02:00"


def test_the_day_file_is_the_day_the_date_shows() -> None:
    late = datetime(2026, 10, 8, 23, 59, 59, tzinfo=timezone(timedelta(hours=-7)))
    assert day_file_name(late) == "2026-10-08.jsonl"
    assert day_file_name(late).removesuffix(".jsonl") == iso(late)[:10]


def test_local_now_is_aware_and_whole_seconds() -> None:
    now = local_now()
    assert now.tzinfo is not None and now.microsecond == 0


def test_only_day_files_are_listed_in_order(tmp_path: Path) -> None:
    for name in ("2026-11-30.jsonl", "2025-01-02.jsonl", "notes.txt", "2026-1-3.jsonl", "x.jsonl"):
        (tmp_path / name).write_text("")
    (tmp_path / "2026-12-01.jsonl").mkdir()
    assert list_day_files(tmp_path) == ["2025-01-02.jsonl", "2026-11-30.jsonl"]
    assert list_day_files(tmp_path / "missing") == []
