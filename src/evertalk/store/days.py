"""Day files and dates: one file per local day, dates in ISO 8601 with offset (SPEC §1.1, §1.2)."""

from __future__ import annotations

import os
import re
from datetime import datetime
from pathlib import Path

_DAY_FILE = re.compile(r"\d{4}-\d{2}-\d{2}\.jsonl")


def local_now() -> datetime:
    """The current local time, aware, to the second."""
    return datetime.now().astimezone().replace(microsecond=0)


def as_local(dt: datetime) -> datetime:
    """An aware datetime; a naive one is taken to be local time."""
    return dt if dt.tzinfo is not None else dt.astimezone()


def iso(dt: datetime) -> str:
    """`2026-10-08T14:03:22+02:00`."""
    return as_local(dt).isoformat(timespec="seconds")


def day_file_name(now: datetime) -> str:
    """`YYYY-MM-DD.jsonl` of the day of `now` in its own offset, the same day its `date` shows."""
    return as_local(now).strftime("%Y-%m-%d") + ".jsonl"


def day_entries(folder: Path) -> list[os.DirEntry[str]]:
    """The day files in `folder` as directory entries, sorted by name: one listing, and a stat
    of each only when asked for (an entry keeps it)."""
    try:
        with os.scandir(folder) as entries:
            found = [e for e in entries if _DAY_FILE.fullmatch(e.name) and e.is_file()]
    except FileNotFoundError:
        return []
    return sorted(found, key=lambda entry: entry.name)


def list_day_files(folder: Path) -> list[str]:
    """The day files in `folder`, sorted by name; other files are not ours to read."""
    return [entry.name for entry in day_entries(folder)]
