"""`chat/edits.jsonl`: the changes made to logged messages in place (a forget, a redaction, a
repair), one line each with the ids it changed: on files, the second half of the stream that
windows follow (the log's count is the first). A window's position in it is the number of lines
it has applied; a window that comes back gets the messages changed since, as they are now.

A line is written, with an fsync, before the messages it names are rewritten: a crash between
the two tells windows to read again messages that did not change, which does no harm, while the
other order could leave a window showing forgotten text. Only ids are kept, never text, so the
file holds nothing a forget must take out. A torn last line (a write that never returned) is
not counted, and the next write ends it first.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path

from evertalk.store.secure import open_file, write_all

EDITS_FILE = "edits.jsonl"


def record_edit(chat_dir: Path, ids: Iterable[int]) -> None:
    """Add a line naming `ids`, on disk when this returns."""
    path = chat_dir / EDITS_FILE
    line = json.dumps({"ids": sorted(set(ids))}, separators=(",", ":")).encode() + b"\n"
    fd, _ = open_file(path, os.O_RDWR | os.O_APPEND)
    try:
        size = os.fstat(fd).st_size
        if size and os.pread(fd, 1, size - 1) != b"\n":
            line = b"\n" + line  # ends a torn line, which is then read as no change
        write_all(fd, line)
        os.fsync(fd)
    finally:
        os.close(fd)


def edits_since(chat_dir: Path, position: int) -> tuple[int, list[int]]:
    """The journal's position now (its complete lines), and the ids changed after `position`
    (every id named, for a position past the end: a journal that was set back)."""
    try:
        data = (chat_dir / EDITS_FILE).read_bytes()
    except FileNotFoundError:
        return 0, []
    lines = data.split(b"\n")[:-1]  # what follows the last newline is torn
    start = position if 0 <= position <= len(lines) else 0
    ids: set[int] = set()
    for raw in lines[start:]:
        ids.update(_ids(raw))
    return len(lines), sorted(ids)


def _ids(raw: bytes) -> list[int]:
    try:
        found = json.loads(raw)["ids"]
    except (ValueError, KeyError, TypeError):
        return []  # a damaged line: what it named is read again by the next full reload
    return [i for i in found if isinstance(i, int)] if isinstance(found, list) else []
