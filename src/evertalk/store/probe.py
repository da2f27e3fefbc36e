"""Whether the disk under a chat takes writes again, after a write failed (a full disk).

The probe writes a scratch file beside the log, as large as a long message, makes it durable and
removes it: a disk with less room than that would only fail again at the next append.
"""

from __future__ import annotations

import os
from contextlib import suppress
from pathlib import Path

from evertalk.store.errors import describe
from evertalk.store.secure import FILE_MODE, write_all

PROBE_NAME = ".write-probe"
PROBE_BYTES = 64 * 1024


def write_problem(chat_dir: Path) -> str | None:
    """None when the chat's folder takes a durable write of PROBE_BYTES now, else why not."""
    path = chat_dir / PROBE_NAME
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, FILE_MODE)
        try:
            write_all(fd, bytes(PROBE_BYTES))
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as error:
        return describe(error)
    finally:
        with suppress(OSError):  # never created, or gone: nothing is left behind either way
            os.unlink(path)
    return None
