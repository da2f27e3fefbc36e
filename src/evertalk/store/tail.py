"""The last messages of the log, read from the end of its newest day files, with no index and
no lock: what a window shows while the service that owns the chat is still starting (SPEC §11
lets a reader read the files).

It never fails and never waits: a torn line, a page group whose other pages are not in what was
read, a file it cannot read, all make it return fewer messages. The caller treats the result
as a first look, replaced by the owner's answer wherever the two differ (an import whose days
alternate spreads the last messages over several files, of which a tail may read only some).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Final

from evertalk.store.days import list_day_files
from evertalk.store.pages import PageGroup
from evertalk.store.records import MessageRecord, read_message_line

FIRST_READ: Final = 64 * 1024  # bytes read from the end of a file at first, doubled as needed
READ_MOST: Final = 16 * 1024 * 1024  # bytes read in all: 40 long pages fit many times over


def last_messages(chat_dir: Path, count: int) -> list[MessageRecord]:
    """Up to `count` messages that end the log, oldest first, with contiguous ids."""
    found: list[MessageRecord] = []
    budget = READ_MOST
    for path in _last_written_first(chat_dir / "main"):
        if len(found) >= count or budget <= 0:
            break
        records, used = _file_tail(path, count - len(found), budget)
        found += records
        budget -= used
    return _contiguous_end(found)[-count:] if count > 0 else []


def _last_written_first(folder: Path) -> list[Path]:
    """The day files, the one written last first: an import appends its messages to the files
    of their own, older days, so the newest name need not hold the newest message."""
    paths = [folder / name for name in list_day_files(folder)]
    return sorted(paths, key=lambda path: (_written(path), path.name), reverse=True)


def _written(path: Path) -> int:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return -1


def _file_tail(path: Path, want: int, budget: int) -> tuple[list[MessageRecord], int]:
    """The messages of the last lines of one file (at least `want` when it holds that many and
    the budget allows), and the bytes read for the last look."""
    try:
        with path.open("rb") as file:
            size = os.fstat(file.fileno()).st_size
            window = min(FIRST_READ, size, budget)
            while True:
                file.seek(size - window)
                records = _messages(file.read(window), whole=window == size)
                if len(records) >= want or window >= min(size, budget):
                    return records, window
                window = min(window * 2, size, budget)
    except OSError:
        return [], 0


def _messages(data: bytes, *, whole: bool) -> list[MessageRecord]:
    """The messages that count among the complete lines of `data`, the end of a file (all of it
    when `whole`). A long message counts only with all its pages (`PageGroup`), so pages whose
    first one is before `data` are left out."""
    lines = data.split(b"\n")
    lines.pop()  # after the last newline: nothing, or a line whose write never finished
    if not whole and lines:
        lines.pop(0)  # it may start in the middle of a line
    group: PageGroup[MessageRecord] = PageGroup()
    counted: list[MessageRecord] = []
    for raw in lines:
        record = read_message_line(raw)
        if isinstance(record, str) or record.page is None:
            group.lose()
            if not isinstance(record, str):
                counted.append(record)
            continue
        _, complete = group.add(record, record.i, record.page)
        counted.extend(complete)
    return counted


def _contiguous_end(records: list[MessageRecord]) -> list[MessageRecord]:
    """The run of records with consecutive ids that ends at the highest one."""
    ordered = sorted({record.i: record for record in records}.values(), key=lambda r: r.i)
    start = len(ordered) - 1
    while start > 0 and ordered[start - 1].i == ordered[start].i - 1:
        start -= 1
    return ordered[max(start, 0) :]
