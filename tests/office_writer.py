"""Another machine writing to a shared chat while a test or a bench measures this one (no tests
of its own)."""

from __future__ import annotations

import threading
from pathlib import Path

from evertalk.pgstore.session import PgSession
from evertalk.shared_chat import SharedChat


def keep_logging(url: str, folder: Path, stop: threading.Event) -> None:
    """A machine named office, on the database itself, logging a long note every 0.2 s until
    `stop` is set."""
    chat = SharedChat.open_shared(PgSession(url, "office"), folder)
    try:
        n = 0
        while not stop.wait(0.2):
            chat.append("user", f"note {n} from the office: " + "detail words " * 60)
            n += 1
    finally:
        chat.close()
