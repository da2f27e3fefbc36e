"""The chat: the one place that glues the durable store to the pure memory core.

Every change goes to disk first (append + fsync) and reaches the core only once it is
durable; nodes the core builds by itself are written before the views that may name them.

Those nodes (free parents, cut nodes) are the one exception to "disk first": the core makes them
as it takes an event, and they are written right after. If that write fails, the core holds
nodes the disk does not, and anything built on them could name lines that a restart would not
find. So the Chat stops there: every later change raises a StoreError asking for a reopen, which
rebuilds the state from what is on disk (and builds the lost free nodes again).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from evertalk.memory import Budget, MemoryCore, Node, node_name
from evertalk.memory.core import SavedViews
from evertalk.memory.text import PLACEHOLDER, flatten, leaf_input, split_text, valid_unicode
from evertalk.memory.tree import BUILT, CUT, FREE, UNBUILT, Built, Tree
from evertalk.memory.view import render
from evertalk.store.chat_dir import ChatStore
from evertalk.store.errors import StoreError


class ToolInputError(ValueError):
    """A memory tool was called with input it refuses; the message is one line."""


@dataclass(frozen=True)
class Status:
    path: Path
    messages: int
    last_date: str | None
    view_lines: int
    view_bytes: int
    shrinking: bool
    cview_lines: int
    cview_bytes: int
    cshrinking: bool
    built: int
    free: int
    cut: int
    unbuilt: int
    ready_leaves: int
    ready_merges: int


class Chat:
    def __init__(self, store: ChatStore, core: MemoryCore, readonly: bool) -> None:
        self.store = store
        self.core = core
        self.readonly = readonly
        self.warnings: list[str] = list(store.warnings)
        self.broken: str | None = None  # why the core and the disk may differ (see above)

    # -- opening and closing --------------------------------------------------------------

    @classmethod
    def open(cls, chat_dir: Path, *, readonly: bool = False, budget: Budget | None = None) -> Chat:
        store = ChatStore.open(chat_dir, create=not readonly, readonly=readonly)
        try:
            core, built, warning = _resume(store, budget)
            chat = cls(store, core, readonly)
            if warning:
                chat.warnings.append(warning)
            if not readonly:
                chat._persist(built)
                store.save_views(core.saved())
        except BaseException:
            store.close()
            raise
        return chat

    def close(self) -> None:
        self.store.close()

    def __enter__(self) -> Chat:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    # -- writing --------------------------------------------------------------------------

    def append(
        self,
        kind: str,
        text: str,
        *,
        key: str | None = None,
        images: list[str] | None = None,
        agent: str | None = None,
        date: datetime | None = None,
    ) -> list[int]:
        """Log a message, split into pages when long (SPEC §1.6) and written in one go; returns
        the ids."""
        self._writable()
        pages = split_text(valid_unicode(text))
        before = self.store.message_count
        ids = self.store.append_pages(kind, pages, date=date, key=key, images=images, agent=agent)
        if self.store.message_count > before:  # not a re-sent key
            for page in pages:
                self._persist(self.core.append(kind, page))
            self.store.save_views(self.core.saved())
        return ids

    def build(self, node: Node, text: str) -> None:
        """Record the compactor's line for a node, durably, then tell the core."""
        self._writable()
        text = valid_unicode(text)
        error = self.core.pending_error(node)
        if error:
            raise StoreError(error)
        self.store.append_node(node[0], node[1], text, BUILT)
        self._persist(self.core.build(node, text))

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
            self.store.save_views(self.core.saved())
        return changed

    def _persist(self, built: list[Built]) -> None:
        """Write the nodes the core just built by itself; the core already counts them built."""
        try:
            for node in built:
                self.store.append_node(node.level, node.index, node.text, node.flag)
        except Exception as error:
            self.broken = f"{node_name(node.node)} could not be written ({error})"
            raise

    def _writable(self) -> None:
        if self.readonly:
            raise StoreError("this chat was opened read-only")
        if self.broken is not None:
            raise broken_error(self.broken)

    # -- reading --------------------------------------------------------------------------

    @property
    def t(self) -> int:
        return self.core.t

    def text_of(self, node: Node) -> str | None:
        """A built node's text (from the core when it holds it, else from the store)."""
        if not self.core.tree.is_built(node):
            return None
        held = self.core.tree.text_of(node)
        if held is not None:
            return held
        record = self.store.read_node(node[0], node[1])
        return None if record is None else record.text

    def render_view(self) -> str:
        return render(self.core.view, self.text_of)

    def render_cview(self) -> str:
        return render(self.core.cview, self.text_of)

    def zoom(self, start: int, count: int) -> str:
        """`zoom(id, n)` of SPEC §6.5: a node's two halves, or message `id` whole when n = 1."""
        node = self.zoom_node(start, count)
        if count == 1:
            record = self.store.read_message(start)
            return f"{start}+1|{leaf_input(record.kind, record.text)}"
        half = count // 2
        lines = []
        for child in ((node[0] - 1, 2 * node[1]), (node[0] - 1, 2 * node[1] + 1)):
            text = self.text_of(child)
            shown = PLACEHOLDER if text is None else flatten(text)
            lines.append(f"{node_name(child)}|{shown}")
        assert half == 1 << (node[0] - 1)
        return "\n".join(lines)

    def zoom_node(self, start: int, count: int) -> Node:
        t = self.core.t
        if count < 1 or count & (count - 1):
            raise ToolInputError(f"n must be a power of 2 (1, 2, 4, …), not {count}")
        if start < 0 or start % count:
            raise ToolInputError(f"id must be a multiple of n ({count}) and not negative")
        if start + count > t:
            raise ToolInputError(f"{start}+{count} goes past the end of the chat ({t} messages)")
        level = count.bit_length() - 1
        return (level, start >> level)

    def date(self, i: int) -> str:
        """`date(id)` of SPEC §6.5, in the machine's current local time zone."""
        if not 0 <= i < self.core.t:
            raise ToolInputError(f"id must be between 0 and {self.core.t - 1}, not {i}")
        return format_date(self.store.read_message(i).date)

    def status(self) -> Status:
        core, flags = self.core, self.core.tree.flags
        counts = [sum(row.count(flag) for row in flags) for flag in (BUILT, FREE, CUT, UNBUILT)]
        last = self.store.read_message(core.t - 1).date if core.t else None
        return Status(
            path=self.store.path,
            messages=core.t,
            last_date=format_date(last) if last else None,
            view_lines=len(core.view),
            view_bytes=core.view.size,
            shrinking=core.view.shrinking,
            cview_lines=len(core.cview),
            cview_bytes=core.cview.size,
            cshrinking=core.cview.shrinking,
            built=counts[0],
            free=counts[1],
            cut=counts[2],
            unbuilt=counts[3],
            ready_leaves=len(core.queues.ready_leaves(core.tree)),
            ready_merges=core.queues.merge_count(),
        )


def broken_error(reason: str) -> StoreError:
    """The error of a change to a chat whose core and disk may differ (Chat.broken)."""
    return StoreError(
        f"the chat's memory no longer matches the disk: {reason}; reopen the chat (start "
        "evertalk again) to go on"
    )


def format_date(iso: str) -> str:
    """`2026-10-08 Thursday 14:03:22 +02:00`, in the current local time zone."""
    moment = datetime.fromisoformat(iso).astimezone()
    offset = moment.strftime("%z")
    return moment.strftime("%Y-%m-%d %A %H:%M:%S ") + f"{offset[:3]}:{offset[3:]}"


def _resume(store: ChatStore, budget: Budget | None) -> tuple[MemoryCore, list[Built], str | None]:
    try:
        tree = _load_tree(store)
    except StoreError:
        if not store.stale:  # else it failed on what was read before the index was rebuilt
            raise
    if store.stale:  # a read found that the index did not match the log; it was rebuilt
        store.resync()
        tree = _load_tree(store)
    saved = store.load_views()
    if isinstance(saved, str):
        core, built, _ = MemoryCore.resume(tree, None, budget)
        return core, built, f"{saved}: folded the views again from message 0"
    return MemoryCore.resume(tree, saved, budget)


def _load_tree(store: ChatStore) -> Tree:
    """The tree's sizes and flags, and the texts the core needs (see Tree.wanted); cut short
    when the store's index was rebuilt meanwhile (`store.stale`), to be loaded again."""
    tree = Tree.from_arrays(store.message_count, store.node_sizes(), store.node_flags())
    nodes, leaves = tree.wanted()
    texts = {}
    for node in nodes:
        stored = store.read_node(node[0], node[1])
        if store.stale:
            return tree
        if stored is not None:
            texts[node] = stored.text
    inputs = {}
    for i in leaves:
        message = store.read_message(i)
        if store.stale:
            return tree
        inputs[i] = leaf_input(message.kind, message.text)
    tree.supply(texts, inputs)
    return tree


@contextmanager
def opened(chat_dir: Path, *, readonly: bool = False) -> Iterator[Chat]:
    chat = Chat.open(chat_dir, readonly=readonly)
    try:
        yield chat
    finally:
        chat.close()


__all__ = [
    "CUT",
    "FREE",
    "Chat",
    "SavedViews",
    "Status",
    "ToolInputError",
    "broken_error",
    "format_date",
]
