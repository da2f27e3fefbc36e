"""What reading other agents' history gives: messages ready to append, the problems met, and
counts of what was left out on purpose."""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

Kind = Literal["user", "ever", "tool", "echo", "note"]
"""The log kinds an import writes (SPEC §1.2); `work`, the reports of Ever's own subagents, is
never imported."""

SourceKind = Literal["claude-code", "codex", "chatgpt", "jsonl"]

ImageData = tuple[str, str]
"""(media type, base64 data), as the app keeps an attached image."""


@dataclass(frozen=True)
class Imported:
    """One message to append, as it was in its source.

    `key` is the idempotency key (SPEC §1.2): the same source read again gives the same keys, so
    that appending them again logs nothing. `time` is the original time, always timezone-aware.
    """

    kind: Kind
    text: str
    time: datetime
    key: str
    source: str
    images: tuple[ImageData, ...] = ()


@dataclass(frozen=True)
class Problem:
    """Something that could not be read; reading went on after it."""

    file: str
    why: str
    line: int | None = None
    record: str | None = None

    def __str__(self) -> str:
        where = self.file if self.line is None else f"{self.file}, line {self.line}"
        if self.record is not None:
            where += f" ({self.record})"
        return f"{where}: {self.why}"


@dataclass(frozen=True)
class Conversation:
    """One session or conversation of a source, its messages in their order there."""

    source: SourceKind
    file: str
    id: str
    title: str | None
    messages: tuple[Imported, ...]


@dataclass
class Reading:
    """Everything `read_paths` found."""

    conversations: list[Conversation] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    skipped: Counter[str] = field(default_factory=Counter)
    """Records and messages left out on purpose, by reason (thoughts, meta records, …)."""
    files: list[str] = field(default_factory=list)
    """The files read, each of a format this package knows."""

    def messages(self) -> list[Imported]:
        """Every message, oldest first; ties keep the order of the conversations and, within
        one, the source's order.

        A message whose time goes back within its conversation (a clock that stepped back, a
        result stamped before its call) stays after the ones before it, so that no conversation
        is ever reordered: it sorts at the latest time seen so far in its conversation.
        """
        timelines = map(_timeline, enumerate(self.conversations))
        return [message for _, _, _, message in heapq.merge(*timelines)]

    def by_conversation(self) -> list[Imported]:
        """Every message, one conversation after another, each whole, the conversations in the
        order of their first message: for sources whose conversations overlap in time, so that
        the log does not mix two of them."""
        ordered = sorted(
            (c.messages[0].time, n, c) for n, c in enumerate(self.conversations) if c.messages
        )
        return [message for _, _, c in ordered for message in c.messages]

    def kinds(self) -> Counter[str]:
        """How many messages of each kind."""
        return Counter(m.kind for c in self.conversations for m in c.messages)

    def span(self) -> tuple[datetime, datetime] | None:
        """The first and the last time among the messages, or None when there are none."""
        times = [m.time for c in self.conversations for m in c.messages]
        return (min(times), max(times)) if times else None


def _timeline(
    numbered: tuple[int, Conversation],
) -> Iterator[tuple[datetime, int, int, Imported]]:
    n, conversation = numbered
    latest: datetime | None = None
    for position, message in enumerate(conversation.messages):
        latest = message.time if latest is None or message.time > latest else latest
        yield latest, n, position, message
