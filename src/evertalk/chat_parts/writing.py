"""`ChatWriting`: every change goes to disk first, then to the core (see chat.py)."""

from __future__ import annotations

from collections.abc import Container, Iterable, Iterator
from contextlib import contextmanager

from evertalk.chat_parts.state import ChatState, broken_error
from evertalk.memory import Node, node_name
from evertalk.memory.text import split_text, valid_unicode
from evertalk.memory.tree import BUILT, Built
from evertalk.store.errors import StoreError
from evertalk.store.message_log import NewMessage


class ChatWriting(ChatState):
    """Messages logged, compactors' lines recorded, the nodes they complete written, and the
    views saved at checkpoints."""

    def log_message(self, message: NewMessage) -> list[int]:
        """Log a message, split into pages when long (SPEC §1.6) and written in one go; returns
        the ids."""
        self._writable()
        kind = message.kind
        pages = split_text(valid_unicode(message.text))
        before = self.store.message_count
        with self._stops_on_failure():
            ids = self.store.append_pages(message, pages, durable=not self._batched)
        if self.store.message_count > before:  # not a re-sent key
            self._take_pages(kind, pages)
            if self.search is not None:
                self.search.follow(self.files)
        return ids

    def _take_pages(
        self,
        kind: str,
        pages: Iterable[str],
        *,
        derive: bool = True,
        stored: Container[int] = (),
    ) -> None:
        """Logged pages reach the core, and the views are saved at a checkpoint. The free nodes
        they complete are written, unless `derive` is False (another machine's pages: it wrote
        them), and but for the leaves of the messages in `stored` (written with them)."""
        core = self.core
        batches = core.view.shrinking, core.cview.shrinking
        built: list[Built] = []
        count = 0
        for page in pages:
            built += core.append(kind, page)
            count += 1
        if derive:
            self._persist([b for b in built if b.level or b.index not in stored])
        after = core.view.shrinking, core.cview.shrinking
        ended = any(was and not now for was, now in zip(batches, after, strict=True))
        self.checkpoints.changed(count)
        if ended or self.checkpoints.due():
            self._save_views_after_append()

    def _save_views_after_append(self) -> None:
        """A checkpoint of the views after a message: the message is logged whether or not
        they can be saved (a full disk), so a failure is a warning, and the views are saved at
        the next checkpoint (an open folds forward meanwhile, SPEC §3.6)."""
        try:
            self.save_views()
        except StoreError as error:
            if self.broken is not None:
                raise
            self.warnings.append(str(error))

    @contextmanager
    def one_sync(self) -> Iterator[None]:
        """The messages appended inside share one fsync, made as the block ends: a batch from
        outside any turn (an import) is acknowledged as a whole, once all of it is on disk."""
        self._batched = True
        try:
            yield
        finally:
            self._batched = False
            self.store.sync()

    def build(self, node: Node, text: str) -> None:
        """Record the compactor's line for a node, durably, then tell the core."""
        self._writable()
        text = valid_unicode(text)
        error = self.core.pending_error(node)
        if error:
            raise StoreError(error)
        with self._stops_on_failure():
            self.store.append_nodes([(node[0], node[1], text, BUILT)])
        self._persist(self.core.build(node, text))
        if self.search is not None:
            self.search.follow(self.files)
        self.tick()

    def fail(self, node: Node) -> None:
        """One failed compaction; the third builds the cut node."""
        self._writable()
        self._persist(self.core.fail(node))

    def cut(self, node: Node) -> None:
        """Build a node from its cut input at once: it does not fit the model's window."""
        self._writable()
        self._persist(self.core.cut(node))

    def resume_batch(self) -> bool:
        """A batch that waits for parents goes on with the nodes built now, with no message
        (`memory compact` once everything is built); the views are saved if it changed them."""
        self._writable()
        changed = self.core.resume_batch()
        if changed:
            self.checkpoints.changed(1)
            self.save_views()
        return changed

    def save_views(self) -> None:
        """Save view.json now if the views changed since it was last saved (a checkpoint)."""
        self._writable()
        if self.checkpoints.pending:
            self.store.save_views(self.core.saved())
            self.checkpoints.saved()

    def tick(self) -> None:
        """Save view.json if a checkpoint is due by time: for owners to call when idle (after a
        turn, after a compaction), so that a quiet chat's views do not wait for the next
        message."""
        if self.checkpoints.due():
            self.save_views()

    def _persist(self, built: list[Built]) -> None:
        """Write the nodes the core just built, in one write; the core already counts them."""
        if not built:
            return
        try:
            self.store.append_nodes([(b.level, b.index, b.text, b.flag) for b in built])
        except Exception as error:
            names = ", ".join(node_name(b.node) for b in built[:3])
            more = f" and {len(built) - 3} more" if len(built) > 3 else ""
            self._broken = f"{names}{more} could not be written ({error})"
            raise broken_error(self._broken) from error
