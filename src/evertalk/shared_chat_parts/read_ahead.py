"""`SharedReadAhead`: what the windows and the compactors read next, read ahead in the
database's thread and kept; a read on the event loop that the database was found unable to
answer fails at once instead of stopping the loop (see shared_chat.py)."""

from __future__ import annotations

from collections.abc import Iterable

import anyio

from evertalk.memory import Node
from evertalk.pgstore.worker import on_event_loop
from evertalk.shared_chat_parts.feed import SharedFeed
from evertalk.store.errors import StoreError
from evertalk.store.records import MessageRecord

READ_AHEAD_MOST = 2000
"""Messages read ahead at once (a window's `records` takes as many)."""
READY_SECONDS = 5.0
"""How long a message waits for the database to answer before it is refused (not held)."""


class SharedReadAhead(SharedFeed):
    """Records, texts and keys read ahead and kept; the plain reads take them from there."""

    def record(self, i: int) -> MessageRecord:
        found = self.kept.record(i)
        if found is not None:
            return found
        self._not_waited_for()
        record = super().record(i)
        self.kept.keep([record])
        return record

    def text_of(self, node: Node) -> str | None:
        if node not in self._texts and self.core.tree.text_of(node) is None:
            self._not_waited_for()
        return super().text_of(node)

    def _not_waited_for(self) -> None:
        """On an event loop, a read the database was found unable to answer is not waited for:
        a StoreError at once."""
        if self._unreachable is not None and on_event_loop():
            raise StoreError(self._unreachable)

    def logged(self, key: str) -> bool:
        known = self.kept.logged(key)
        if known is not None:
            return known
        self._not_waited_for()
        return super().logged(key)

    def reachable(self) -> None:
        if self._unreachable is not None:
            raise StoreError(self._unreachable)

    async def aready(self, key: str | None = None) -> None:
        """The database answers (its changes folded), within READY_SECONDS; and `key` is
        looked up. A StoreError, one line, when not: the message is not held."""
        with anyio.move_on_after(READY_SECONDS):
            await self.afollow()
            if key is not None:
                await self.alogged_keys([key])
            return
        self._unreachable = (
            f"the database at {self.shared.where} did not answer within {READY_SECONDS:g} s"
        )
        raise StoreError(self._unreachable)

    async def aread_records(self, start: int, stop: int) -> None:
        wanted = self.kept.missing(range(max(0, start), min(stop, self.core.t)))
        if wanted:
            low, high = wanted[0], min(wanted[-1] + 1, wanted[0] + READ_AHEAD_MOST)
            self.kept.keep(await self._read(lambda chat: chat.read_messages(low, high)))

    async def aread_texts(self, nodes: Iterable[Node]) -> None:
        wanted = self._texts_to_read(nodes)
        if wanted:
            found = await self._read(lambda chat: chat.read_node_list(wanted))
            for record in found:
                self._keep_text((record.l, record.i), record.text)

    async def aread_inputs(self, node: Node) -> None:
        level, index = node
        if level == 0:
            await self.aread_records(index, index + 1)
        halves = [(level - 1, 2 * index), (level - 1, 2 * index + 1)] if level else []
        await self.aread_texts([*halves, *self.core.context(node)])

    async def aread_zoom(self, start: int, count: int) -> None:
        if count == 1:
            await self.aread_records(start, start + 1)
        elif count > 1 and not count & (count - 1) and start >= 0 and not start % count:
            level, index = count.bit_length() - 1, start // count
            await self.aread_texts([(level - 1, 2 * index), (level - 1, 2 * index + 1)])

    async def alogged_keys(self, keys: Iterable[str]) -> None:
        wanted = [key for key in keys if self.kept.logged(key) is not True]
        if wanted:
            found = await self._read(lambda chat: [chat.logged(key) for key in wanted])
            for key, logged in zip(wanted, found, strict=True):
                self.kept.key(key, logged)
