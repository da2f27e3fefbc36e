"""Where a home's service listens and logs. Shared by the service and its clients: standard
library only, so that a client imports nothing heavy to find it."""

from __future__ import annotations

import hashlib
import os
import sys
import tempfile
from datetime import datetime
from pathlib import Path

SOCKET_NAME = "service.sock"
LOG_NAME = "service.log"
MAX_SOCKET_PATH = 100
"""Bytes of a Unix socket's path that every system takes (Linux 107, macOS 103)."""


def socket_path(home: Path) -> Path:
    """`<home>/service.sock`; for a home too deep for a socket's path, a name derived from the
    home in a private folder of the temporary directory."""
    path = home.resolve() / SOCKET_NAME
    if len(os.fsencode(path)) <= MAX_SOCKET_PATH:
        return path
    digest = hashlib.sha256(os.fsencode(home.resolve())).hexdigest()[:20]
    return Path(tempfile.gettempdir()) / f"evertalk-{os.getuid()}" / f"{digest}.sock"


def log_path(home: Path) -> Path:
    return home / LOG_NAME


def log(line: str) -> None:
    """One line of the service's log (standard error: the log file when started by a client)."""
    stamp = datetime.now().astimezone().isoformat(timespec="seconds")
    print(f"{stamp} [{os.getpid()}] {line}", file=sys.stderr, flush=True)
