"""What every message log takes: the main chat (`Chat`), a subagent's own log, and the session's
guard around either. `append` is said once, here; each log writes a `NewMessage` its own way."""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from datetime import datetime


@dataclass(frozen=True)
class NewMessage:
    """A message to log, before it has ids: its pages get one each (SPEC §1.6)."""

    kind: str
    text: str
    key: str | None = None  # a client's idempotency key
    images: list[str] | None = None  # the saved images' names, kept with the first page
    agent: str | None = None
    date: datetime | None = None  # None: now
    failed: bool = False  # an `echo` of a tool call that failed


class MessageLog(ABC):
    """Where a message is logged, split into pages when long."""

    def append(
        self,
        kind: str,
        text: str,
        *,
        key: str | None = None,
        images: list[str] | None = None,
        agent: str | None = None,
        date: datetime | None = None,
        failed: bool = False,
    ) -> list[int]:
        """Log a message; returns the ids of its pages."""
        return self.log_message(NewMessage(kind, text, key, images, agent, date, failed))

    @abstractmethod
    def log_message(self, message: NewMessage) -> list[int]:
        """Log `message`; returns the ids of its pages."""
