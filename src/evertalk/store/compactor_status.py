"""`chat/compactor.json`: what the compactor of the process that owns the chat is doing.

Written by the owner (atomically, when it changes, at most once a second and at most a second
late) so that `evertalk memory status`, run from another terminal, can show it; its measured rate
gives the estimate of how long catching up takes (`catch_up_seconds`).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

from evertalk.processes import process_alive
from evertalk.store.lock import read_owner
from evertalk.store.secure import write_atomic

STATUS_NAME = "compactor.json"

DEFAULT_CALL_SECONDS = 10.0
"""How long one compaction call takes when no rate was measured. A small model thinking at a high
effort (SPEC §4.7) mostly answers in 3 to 10 seconds; the long end, so that an estimate errs
long rather than promise a wait that then doubles."""

CALLS_AT_ONCE = 8
"""The compactor's calls in flight (SPEC §4.1; `config.MAX_CONCURRENCY`, not imported: `memory
status` must start fast)."""


@dataclass(frozen=True)
class CompactorStatus:
    """What the owner's compactor is doing, as compactor.json holds it."""

    pid: int
    running: int  # calls in flight
    queued: int  # nodes that need a model call, neither running nor failed (ready or not yet)
    failed: int  # nodes waiting to be retried
    last_error: str | None
    calls: int
    built: int
    cost: float
    # summaries built per second while busy; None until measured (and in files written by an
    # evertalk from before it was measured)
    rate: float | None = None
    paused: bool = False  # its model cannot be used or reached: no summary until it can


def catch_up_seconds(to_go: int, rate: float | None, concurrency: int = CALLS_AT_ONCE) -> float:
    """About how long `to_go` summaries take: at the measured `rate` (summaries a second), else
    at DEFAULT_CALL_SECONDS a call with `concurrency` calls at once."""
    per_second = rate if rate else concurrency / DEFAULT_CALL_SECONDS
    return to_go / per_second


def write_status(chat_dir: Path, status: CompactorStatus) -> None:
    """Not synced: the status is for other processes to read while this one runs, and a status
    torn by a power cut names a process that is gone (read as None)."""
    data = json.dumps(asdict(status)).encode()
    write_atomic(chat_dir / STATUS_NAME, data, durable=False)


def read_status(chat_dir: Path) -> CompactorStatus | None:
    """The live compactor's status, or None when no process owns the chat."""
    owner = read_owner(chat_dir)
    if owner is None:
        return None
    try:
        data = json.loads((chat_dir / STATUS_NAME).read_text())
        status = CompactorStatus(**data)
    except (OSError, ValueError, TypeError):
        return None
    return status if status.pid == owner and process_alive(owner) else None
