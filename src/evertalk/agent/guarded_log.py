"""The one way a session writes to a log: `GuardedLog`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from evertalk.chat import Chat
from evertalk.compactor.service import Compactor
from evertalk.config import redact
from evertalk.store.message_log import MessageLog, NewMessage


@dataclass(frozen=True)
class GuardedLog(MessageLog):
    """A log as the session's loops write to it. Every text has the known secrets replaced
    first: tool calls (the model may repeat a key it was shown), results and replies alike (SPEC
    §1.7: the log holds everything, forever). With a compactor (the main chat), each message
    also wakes it, so that a turn's own messages are summarized while it runs and the next turn
    finds its view settled (and failed nodes get their retry at the next message, SPEC §4.5)."""

    inner: MessageLog
    secrets: Sequence[str]
    compactor: Compactor | None = None

    def log_message(self, message: NewMessage) -> list[int]:
        ids = self.inner.log_message(replace(message, text=redact(message.text, self.secrets)))
        if self.compactor is not None:
            self.compactor.message_logged()
        return ids

    async def alog_message(self, message: NewMessage) -> list[int]:
        """`log_message`, awaited: a chat in a database logs in its own thread."""
        redacted = replace(message, text=redact(message.text, self.secrets))
        inner = self.inner
        ids = (
            await inner.alog_message(redacted)
            if isinstance(inner, Chat)
            else inner.log_message(redacted)
        )
        if self.compactor is not None:
            self.compactor.message_logged()
        return ids

    async def aappend(self, kind: str, text: str, *, key: str | None = None) -> list[int]:
        return await self.alog_message(NewMessage(kind, text, key))

    async def flushed(self) -> None:
        """Once what was written is logged (a shared chat's turn log is written in order, in
        the database's thread: `shared_log.py`)."""
        flushed = getattr(self.inner, "flushed", None)
        if flushed is not None:
            await flushed()
