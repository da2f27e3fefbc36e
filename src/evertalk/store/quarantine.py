"""Setting lines aside: moved out of the log's files into `chat/quarantine/`, never deleted.

Used only to recover from damage that a crash cannot cause (a day file deleted or cut short by
hand): the append-only rule of SPEC §1.3 is for the log as evertalk writes it.
"""

from __future__ import annotations

import os
from collections import defaultdict
from datetime import datetime
from pathlib import Path

from evertalk.store.secure import fsync_dir, make_dir, write_atomic, write_synced

QUARANTINE_DIR = "quarantine"


def set_aside(chat_dir: Path, lines: list[tuple[Path, int, int]]) -> Path:
    """Copy these lines (file, offset, length with the newline) to a new quarantine file, made
    durable first, then rewrite each file without them; returns the quarantine file.

    A crash in between leaves the lines in both places, and the next open sets them aside again:
    copies twice, never lost.
    """
    folder = chat_dir / QUARANTINE_DIR
    make_dir(folder)
    target = _new_file(folder)
    by_file: dict[Path, list[tuple[int, int]]] = defaultdict(list)
    for path, offset, length in lines:
        by_file[path].append((offset, length))
    data = b"".join(_read(path, spans) for path, spans in by_file.items())
    write_synced(target, data, os.O_APPEND)
    fsync_dir(folder)
    for path, spans in by_file.items():
        write_atomic(path, _without(path.read_bytes(), spans))
    return target


def _new_file(folder: Path) -> Path:
    stamp = datetime.now().astimezone().strftime("%Y-%m-%dT%H%M%S")
    for n in range(1000):
        path = folder / (f"tree-{stamp}.jsonl" if n == 0 else f"tree-{stamp}-{n}.jsonl")
        if not path.exists():
            return path
    raise FileExistsError(f"{folder}: no free name for a quarantine file")


def _read(path: Path, spans: list[tuple[int, int]]) -> bytes:
    data = path.read_bytes()
    return b"".join(data[offset : offset + length] for offset, length in sorted(spans))


def _without(data: bytes, spans: list[tuple[int, int]]) -> bytes:
    kept, at = [], 0
    for offset, length in sorted(spans):
        kept.append(data[at:offset])
        at = offset + length
    kept.append(data[at:])
    return b"".join(kept)
