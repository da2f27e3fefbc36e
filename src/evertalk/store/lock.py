"""The owner's lock on `chat/lock` (SPEC §1.7).

flock is tied to the open file, so the operating system drops it when the owner dies: there is
never a stale lock to clean up, and the pid in the file is only there to name the owner.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path

from evertalk.store.errors import ChatLocked
from evertalk.store.secure import open_file, write_all

LOCK_NAME = "lock"


def _read_pid(fd: int) -> int | None:
    text = os.pread(fd, 64, 0).decode("ascii", "replace").strip()
    return int(text) if text.isdigit() else None


class ChatLock:
    """A held lock; it lasts until `release()` or the end of the process."""

    def __init__(self, fd: int) -> None:
        self._fd: int | None = fd

    @classmethod
    def acquire(cls, chat_dir: Path) -> ChatLock:
        fd, _ = open_file(chat_dir / LOCK_NAME, os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = _read_pid(fd)
            os.close(fd)
            # The owner may not have written its pid yet, in the instant after it took the lock.
            who = f"pid {pid}" if pid is not None else "pid unknown"
            raise ChatLocked(
                f"the chat at {chat_dir} is open in another process ({who})", pid
            ) from None
        except BaseException:
            os.close(fd)
            raise
        try:
            os.ftruncate(fd, 0)
            write_all(fd, f"{os.getpid()}\n".encode(), 0)
        except BaseException:
            os.close(fd)
            raise
        return cls(fd)

    @property
    def held(self) -> bool:
        return self._fd is not None

    def release(self) -> None:
        """Closing the file drops the lock; the pid stays, harmless, until the next owner."""
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)


def read_owner(chat_dir: Path) -> int | None:
    """The pid of the process that owns the chat, or None when nobody does.

    The probe takes a shared lock for an instant; an owner starting in that very instant is
    refused as if the chat were open, which it nearly was.
    """
    try:
        fd = os.open(chat_dir / LOCK_NAME, os.O_RDONLY)
    except FileNotFoundError:
        return None
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        except BlockingIOError:
            return _read_pid(fd)
        return None
    finally:
        os.close(fd)
