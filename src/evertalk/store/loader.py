"""Opening the index: trust the checkpoint, scan only the log's tail, or rebuild from scratch.

The checkpoint is loaded first (checkpoint.py). A reader whose checkpoint covers the whole log,
as `evertalk memory status` finds a chat whose owner closed it, uses it as it is, with nothing to
scan; every other open goes through the scan (scan.py, a module loaded only then).
"""

from __future__ import annotations

from pathlib import Path

from evertalk.store.checkpoint import (
    INDEX_DIR,
    Checkpoint,
    behind,
    caught_up,
    load_checkpoint,
    log_sizes,
)
from evertalk.store.index import Index


def open_index(
    chat_dir: Path, *, readonly: bool, warnings: list[str], rebuild: str | None = None
) -> tuple[Index, dict[str, bytes]]:
    """The chat's index, brought up to date with the log, and the torn-line terminators.

    What a scan finds is written once checked. A read-only open that must scan (the index is
    missing, damaged or behind the log) writes what it found only if it can take the chat's lock
    at once, and then under the lock, as the owner would have, so that every reader of a chat
    another program wrote does not rebuild the index again; and only if the log held nothing to
    warn about, since damage is the owner's to report and index. Otherwise it keeps what it
    scanned in memory. `rebuild` gives a reason to build it from the whole log, whatever the
    checkpoint says (a read that found the index wrong: a reader keeps that rebuild in memory).
    """
    if not readonly or rebuild is not None:
        from evertalk.store.scan import open_scanning

        return open_scanning(chat_dir, readonly=readonly, warnings=warnings, rebuild=rebuild)
    sizes = log_sizes(chat_dir)
    base = load_checkpoint(chat_dir / INDEX_DIR, sizes, readonly=True)
    if isinstance(base, Checkpoint) and not behind(base.meta, sizes):
        return caught_up(chat_dir, base, sizes), {}  # no line to scan, no torn line
    from evertalk.store.scan import open_behind

    return open_behind(chat_dir, base, warnings)
