"""`SharedBuilding`: a node's line (or its cut) stored as one change and folded from the feed;
failures counted for the chat; free nodes written by the machine whose change made them (see
shared_chat.py)."""

from __future__ import annotations

from contextlib import suppress

from evertalk.memory import Node
from evertalk.memory.core import FAILURES_BEFORE_CUT
from evertalk.memory.text import valid_unicode
from evertalk.memory.tree import BUILT, CUT, Built
from evertalk.pgstore.worker import on_event_loop
from evertalk.shared_chat_parts.feed import SharedFeed
from evertalk.store.errors import StoreError


class SharedBuilding(SharedFeed):
    """Builds, cuts and failures, at once or awaited, each folded as its change."""

    def build(self, node: Node, text: str) -> None:
        self._writable()
        text = valid_unicode(text)
        if self._built_or_refused(node):
            return
        self._put(node, text, BUILT)
        self.tick()

    async def abuild(self, node: Node, text: str) -> None:
        self._writable()
        text = valid_unicode(text)
        if self._built_or_refused(node):
            return
        await self._aput(node, text, BUILT)
        self.tick()

    def _built_or_refused(self, node: Node) -> bool:
        if self.core.tree.is_built(node):
            return True  # another machine's line got in first (its lease had lapsed)
        error = self.core.pending_error(node)
        if error:
            raise StoreError(error)
        return False

    def fail(self, node: Node) -> None:
        """One failed compaction, counted for the chat; the third, on whichever machine,
        cuts the node for every machine."""
        self._writable()
        self.follow()
        if self.core.tree.is_built(node):
            return  # another machine built it meanwhile
        if self.shared.count_failure(node[0], node[1]) < FAILURES_BEFORE_CUT:
            self.core.fail(node)  # this machine's count, below the chat's: never a cut
        else:
            self.cut(node)

    async def afail(self, node: Node) -> None:
        self._writable()
        await self.afollow()
        if self.core.tree.is_built(node):
            return
        l, i = node  # noqa: E741
        count = await self.shared.call(lambda chat: chat.count_failure(l, i), idempotent=False)
        if count < FAILURES_BEFORE_CUT:
            self.core.fail(node)
        else:
            await self.acut(node)

    def cut(self, node: Node) -> None:
        self._writable()
        self.follow()
        if self._built_or_refused(node):
            return
        self._put(node, self.core.tree.cut_text(node), CUT)

    async def acut(self, node: Node) -> None:
        self._writable()
        await self.afollow()
        if self._built_or_refused(node):
            return
        await self._aput(node, self.core.tree.cut_text(node), CUT)

    def resume_batch(self) -> bool:
        """Nothing: the views change at a message only, so that every machine's stay alike."""
        return False

    def _put(self, node: Node, text: str, flag: int) -> None:
        self._texts_built[node] = (text, flag)
        seq = None
        try:
            seq = self.shared.put_node((node[0], node[1], text, flag))
        finally:
            self._fold_own(seq, {"nodes": [list(node)]})
            self._texts_built.pop(node, None)

    async def _aput(self, node: Node, text: str, flag: int) -> None:
        self._texts_built[node] = (text, flag)
        l, i = node  # noqa: E741
        try:
            try:
                seq = await self.shared.call(lambda chat: chat.put_built(l, i, text, flag))
            except StoreError:
                with suppress(StoreError):
                    await self.afollow()  # the line may have got in before the reply was lost
                raise
            await self._afold_own(seq, {"nodes": [list(node)]})
        finally:
            self._texts_built.pop(node, None)

    def _persist(self, built: list[Built]) -> None:
        """Free nodes, which every machine derives alike: on an event loop, written in the
        database's thread in their turn. One lost is no loss (a machine that opens derives it
        again), so a failure is not waited for."""
        if built and on_event_loop():
            rows = [(b.level, b.index, b.text, b.flag) for b in built]
            self.shared.submit(lambda chat: chat.put_derived(rows))
            return
        super()._persist(built)
