"""Messages logged from outside any turn (an import, another agent's note, a captured message):
`Outside`, and the `Recorder` that logs them, each once by its key. They start no turn, and a
running one does not make them wait: it may wait for a permission answer for as long as the
user is away, and it never sees them (its view was rendered before); the next turn's view has
them."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal, get_args

from evertalk.agent.guarded_log import GuardedLog
from evertalk.agent.images import ImageStore
from evertalk.chat import Chat
from evertalk.providers.base import Image
from evertalk.store.errors import StoreError
from evertalk.store.message_log import NewMessage

OutsideKind = Literal["user", "ever", "tool", "echo", "note"]
OUTSIDE_KINDS: tuple[OutsideKind, ...] = get_args(OutsideKind)

Recorded = tuple[list[int], int]
"""The ids logged, and how many messages were skipped as logged before."""


@dataclass(frozen=True)
class Outside:
    """A message logged from outside a turn: its kind, its text, its original time (None: now),
    a key that makes it logged once, and its images."""

    kind: OutsideKind
    text: str
    date: datetime | None = None
    key: str | None = None
    images: tuple[Image, ...] = ()


class Recorder:
    """Logs outside messages into the main chat, through the session's guarded log."""

    def __init__(self, chat: Chat, log: GuardedLog, images: ImageStore) -> None:
        self.chat, self.log, self.images = chat, log, images
        self._ahead: tuple[list[Outside], Recorded | StoreError] | None = None

    def record(self, messages: Sequence[Outside]) -> Recorded:
        """Log them in order, each unless its key was logged before (or answer with what
        `record_ahead` logged of the same messages)."""
        ahead, self._ahead = self._ahead, None
        if ahead is not None and ahead[0] == list(messages):
            if isinstance(ahead[1], StoreError):
                raise ahead[1]
            return ahead[1]
        ids: list[int] = []
        skipped = 0
        with self.chat.one_sync():
            for message in messages:
                if message.key is not None and self.chat.logged(message.key):
                    skipped += 1
                    continue
                ids += self.log.append(
                    message.kind,
                    message.text,
                    key=message.key,
                    images=self.images.save_all(message.images),
                    date=message.date,
                )
        return ids, skipped

    async def record_ahead(self, messages: Sequence[Outside]) -> None:
        """Log them now, awaited (a chat in a database logs in its own thread), for the
        `record` of the same messages that comes next to answer at once."""
        try:
            outcome: Recorded | StoreError = await self._arecord(messages)
        except StoreError as error:
            outcome = error
        self._ahead = (list(messages), outcome)

    async def _arecord(self, messages: Sequence[Outside]) -> Recorded:
        await self.chat.alogged_keys(m.key for m in messages if m.key is not None)
        ids: list[int] = []
        skipped = 0
        for message in messages:
            if message.key is not None and self.chat.logged(message.key):
                skipped += 1
                continue
            images = self.images.save_all(message.images)
            new = NewMessage(message.kind, message.text, message.key, images, date=message.date)
            ids += await self.log.alog_message(new)
        return ids, skipped
