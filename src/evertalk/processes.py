"""Whether a process runs: for a lock's owner, a compactor's status, a service that stops."""

from __future__ import annotations

import os


def process_alive(pid: int) -> bool:
    """Whether process `pid` runs; one that exited and waits to be reaped (a zombie) does not."""
    try:
        with open(f"/proc/{pid}/stat", encoding="ascii", errors="replace") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False
    except OSError:  # no /proc (macOS): ask the kernel
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        return True
