"""The errors the store raises; each message is one line a user can act on."""

from __future__ import annotations


class StoreError(Exception):
    """The chat folder cannot be used as asked (permissions, disk, a bad state)."""


class ChatLocked(StoreError):
    """Another process owns the chat (SPEC §1.7)."""

    def __init__(self, message: str, pid: int | None) -> None:
        super().__init__(message)
        self.pid = pid


class IndexMismatch(StoreError):
    """The derived index disagrees with the log and could not be rebuilt in this process; the
    next open rebuilds it from the log."""


class CorruptLog(StoreError):
    """The log breaks a rule that makes the chat unopenable: a gap or a duplicate id (SPEC §1.2)."""


def describe(error: OSError) -> str:
    """One line for an OSError, naming the file when the OS told us which."""
    reason = error.strerror or str(error)
    if error.filename is not None:
        return f"{error.filename}: {reason}"
    return reason
