"""`chat/compactor.json`: what the compactor of the process that owns the chat is doing.

Written by the owner (atomically, when it changes, at most once a second and at most a second
late) so that `evertalk memory status`, run from another terminal, can show it.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from evertalk.store.lock import read_owner
from evertalk.store.secure import write_atomic

STATUS_NAME = "compactor.json"


@dataclass(frozen=True)
class CompactorStatus:
    pid: int
    running: int  # calls in flight
    queued: int  # nodes that need a model call, neither running nor failed (ready or not yet)
    failed: int  # nodes waiting to be retried
    last_error: str | None
    calls: int
    built: int
    cost: float


def write_status(chat_dir: Path, status: CompactorStatus) -> None:
    write_atomic(chat_dir / STATUS_NAME, json.dumps(asdict(status)).encode())


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
    return status if status.pid == owner and _alive(owner) else None


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True
