"""What every message log takes: the main chat (`Chat`), a subagent's own log, the session's
guard around either, and the stores under the chat (files, PostgreSQL). `append` is said once,
here; each log writes a `NewMessage` its own way."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any


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


class PageStore(MessageLog):
    """A store of the chat's log: it writes pages as it is given them (the chat splits a long
    message first, SPEC §1.6), all of one message at once or none."""

    def log_message(self, message: NewMessage) -> list[int]:
        return self.append_pages(message, [message.text])

    def append_message(self, kind: str, text: str, **fields: Any) -> int:
        """Log a one-page message and return its id; with a `key` already logged, that id."""
        return self.append(kind, text, **fields)[0]

    @abstractmethod
    def append_pages(self, message: NewMessage, pages: Sequence[str]) -> list[int]:
        """Log `message` as the consecutive `pages`, at once; their ids. A key logged already
        returns the ids logged then."""


def page_keys(key: str | None, count: int) -> list[str | None]:
    """The idempotency key of each of a message's pages: `key.0`, `key.1`, … when it has
    several, so that each line of the log holds its own."""
    if key is None or count == 1:
        return [key] * count
    return [f"{key}.{n}" for n in range(count)]
