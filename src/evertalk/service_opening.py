"""What a starting service says in its log, and how a client reads it.

A service opens the chat before it listens: the lock first, then the files, then the socket.
Opening a large chat takes a while (a million messages with no `view.json` fold their views
from the first message), and a client that sees no socket for a few seconds must not call that
a failure. So the service logs `starting: opening the chat …` before it takes the lock, and a
client that finds the chat's lock held by a process whose last line in the log is that one
knows a service is on its way, and waits for it. Standard library only: both sides import it,
so it stands below both (a client imports nothing of `service/`).
"""

from __future__ import annotations

import re
from pathlib import Path

from evertalk.protocol.paths import log_path

STARTING = "starting: opening the chat"
"""The line a service logs before it opens the chat (`service_cli`)."""
TAIL_BYTES = 64 * 1024
"""How much of the end of the log is read for the owner's last line."""


def opening(home: Path) -> int | None:
    """The pid of a service that holds the chat of `home` and is still opening it (its last
    line in the log says so), or None."""
    from evertalk.store.lock import read_owner

    owner = read_owner(home / "chat")
    if owner is None:
        return None
    last = _last_line_of(log_path(home), owner)
    return owner if last is not None and last.startswith(STARTING) else None


def _last_line_of(log: Path, pid: int) -> str | None:
    """The last line that process `pid` wrote to the log, without its stamp."""
    try:
        with log.open("rb") as file:
            size = file.seek(0, 2)
            file.seek(max(0, size - TAIL_BYTES))
            text = file.read().decode("utf-8", "replace")
    except OSError:
        return None
    found = re.findall(rf"^\S+ \[{pid}\] (.*)$", text, re.M)
    return found[-1] if found else None
