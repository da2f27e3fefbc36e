"""`SharedMessages`: a message logged in one transaction, fenced by its turn, and folded as the
feed's change (see shared_chat.py); a turn's messages queued for the writer (`shared_log.py`)."""

from __future__ import annotations

from dataclasses import replace

from evertalk.memory.text import leaf_input, split_text, valid_unicode
from evertalk.memory.tree import free_leaf
from evertalk.pgstore.pgchat import logged_records
from evertalk.shared_chat_parts.feed import SharedFeed
from evertalk.shared_chat_parts.fence import TURN, TurnFence, told
from evertalk.shared_log import Queued, QueuedLog
from evertalk.store.days import local_now
from evertalk.store.message_log import MessageLog, NewMessage


class SharedMessages(SharedFeed):
    """Messages logged at once or queued for the turns' writer, and their ids by key."""

    def log_message(self, message: NewMessage) -> list[int]:
        self._writable()
        message, pages, leaves = _prepared(message)
        fence = TURN.get()
        epoch = fence.epoch if fence is not None and fence.active else None
        with self._stops_on_failure(), told(fence):
            ids, seq = self.shared.log_pages(message, pages, leaves, epoch)
        self._logged_now(message, pages, ids, seq)
        self._fold_own(seq, {"append": [ids[0], len(ids)]})
        return ids

    async def alog_message(self, message: NewMessage) -> list[int]:
        self._writable()
        fence = TURN.get()
        epoch = fence.epoch if fence is not None and fence.active else None
        return await self._alog(message, fence, epoch)

    async def _alog(
        self, message: NewMessage, fence: TurnFence | None, epoch: int | None
    ) -> list[int]:
        message, pages, leaves = _prepared(message)
        with self._stops_on_failure(), told(fence):
            ids, seq = await self.shared.alog_pages(message, pages, leaves, epoch)
        self._logged_now(message, pages, ids, seq)
        await self._afold_own(seq, {"append": [ids[0], len(ids)]})
        return ids

    def _logged_now(
        self, message: NewMessage, pages: list[str], ids: list[int], seq: int | None
    ) -> None:
        """What this machine knows of a message it logged: its pages, to fold it without a
        read; its records, for the windows; its key."""
        if message.key is not None:
            self.kept.key(message.key, True)
        if seq is None:
            return  # its key was logged before: folded then
        if ids[0] >= self.core.t:  # else the feed brought it first
            self._own[ids[0]] = (message.kind, pages)
        self.kept.keep(logged_records(ids[0], message, pages))

    def turn_log(self) -> MessageLog:
        """The turns' log: queued, logged by `writer` in order (`shared_log.py`)."""
        return QueuedLog(self.queue_message, self.flushed)

    def queue_message(self, message: NewMessage) -> None:
        self._writable()
        fence = TURN.get()
        epoch = fence.epoch if fence is not None and fence.active else None
        self.writer.put(Queued(_dated(message), fence, epoch))

    async def _write_queued(self, item: Queued) -> None:
        fence = item.fence
        assert fence is None or isinstance(fence, TurnFence)
        await self._alog(item.message, fence, item.epoch)

    async def flushed(self) -> None:
        await self.writer.flushed()

    def ids_logged(self, key: str) -> list[int] | None:
        """The ids of the message logged with this idempotency key, or None."""
        return self.shared.logged_ids(key)


def _prepared(message: NewMessage) -> tuple[NewMessage, list[str], list[str | None]]:
    """The message dated (as the records kept of it say), its pages and their free leaves."""
    pages = split_text(valid_unicode(message.text))
    leaves = [free_leaf(leaf_input(message.kind, page)) for page in pages]
    return _dated(message), pages, leaves


def _dated(message: NewMessage) -> NewMessage:
    """Dated now if it is not: a queued message keeps the time the turn logged it."""
    return message if message.date is not None else replace(message, date=local_now())
