"""The chat: the one place that glues the durable store to the pure memory core.

Every change goes to disk first (append + fsync) and reaches the core only once it is
durable; nodes the core builds by itself are written before the views that may name them.

Those nodes (free parents, cut nodes) are the one exception to "disk first": the core makes them
as it takes an event, and they are written right after. If that write fails, the core holds
nodes the disk does not, and anything built on them could name lines that a restart would not
find. So the Chat stops there: every later change raises a StoreError asking for a reopen, which
rebuilds the state from what is on disk (and builds the lost free nodes again). A failed append
of the store's own (a full disk) stops it the same way: only a reopen, which scans the log's
tail, knows what got in. `broken` says why; the service reopens a broken chat by itself once
the disk takes writes again (or at the next message, if that comes first).

Free nodes are derived (an open builds a lost one again), so their write is not synced on its
own: a message or a compactor's line costs one fsync with the free nodes it completes. The
views are derived too: `view.json` is saved at checkpoints (see `ViewCheckpoints`), not at every
message, and an open folds forward from it (SPEC §3.6 step 3).
"""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Callable, Container, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Self

from evertalk.memory import Budget, MemoryCore, Node, node_name
from evertalk.memory.coarse import Fitted, fit, rendered_size, shown_size, summaries_to_go
from evertalk.memory.core import CatchUp, SavedViews
from evertalk.memory.text import PLACEHOLDER, flatten, leaf_input, split_text, valid_unicode
from evertalk.memory.tree import BUILT, CUT, FREE, UNBUILT, Built, Tree
from evertalk.memory.view import frame, render_line
from evertalk.note_lines import zoomed_message
from evertalk.store.chat_dir import ChatStore
from evertalk.store.closing import Closing
from evertalk.store.errors import StoreError
from evertalk.store.message_log import MessageLog, NewMessage
from evertalk.store.storage import ChatStorage
from evertalk.store.views import ViewCheckpoints

if TYPE_CHECKING:
    from evertalk.store.records import MessageRecord
    from evertalk.store.search_index import SearchIndex

# Built nodes' texts and rendered lines kept: a built node never changes, and a view at a million
# messages has a few hundred lines (its cview and the view fitted for a turn reuse most of them).
TEXTS_KEPT = 4096


class ToolInputError(ValueError):
    """A memory tool was called with input it refuses; the message is one line."""


@dataclass(frozen=True)
class Status:
    """What `evertalk memory status` shows of the chat."""

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


class Chat(MessageLog, Closing):
    def __init__(self, store: ChatStorage, core: MemoryCore, readonly: bool) -> None:
        self.store = store
        self.core = core
        self.readonly = readonly
        self.warnings: list[str] = list(store.warnings)
        self._broken: str | None = None  # why the core and the disk may differ (see above)
        self.checkpoints = ViewCheckpoints(time.monotonic)
        self._texts: OrderedDict[Node, str] = OrderedDict()
        self._lines: OrderedDict[Node, str] = OrderedDict()
        self._batched = False  # inside `one_sync`
        self.search_enabled = False  # `[memory] search = true`: the `search` tool is offered
        self.search: SearchIndex | None = None
        """The search index kept up to date as records are logged (see keep_search_index)."""
        self._folded: tuple[SavedViews | str | None] | None = None
        """For a reader that folded the views: (what view.json held then,), until it saves
        them; None when there is nothing to save (or it may not)."""

    # -- opening and closing --------------------------------------------------------------

    @classmethod
    def open(
        cls,
        chat_dir: Path,
        *,
        readonly: bool = False,
        budget: Budget | None = None,
        search: bool = False,
    ) -> Chat:
        store = ChatStore.open(chat_dir, create=not readonly, readonly=readonly)
        return cls.over(store, readonly=readonly, budget=budget, search=search)

    @classmethod
    def over(
        cls,
        store: ChatStorage,
        *,
        readonly: bool = False,
        budget: Budget | None = None,
        search: bool = False,
    ) -> Self:
        """The chat of an open store, which it closes from then on (and at once on failure)."""
        try:
            core, built, warning, loaded = _resume(store, budget)
            chat = cls(store, core, readonly)
            if warning:
                chat.warnings.append(warning)
            folded = (loaded if isinstance(loaded, SavedViews) else None) != core.saved()
            if readonly:
                # a lost free node is the owner's to write before any view may name it
                chat._folded = (loaded,) if folded and not built else None
                chat.save_folded_views()
            else:
                chat._persist(built)
                if folded:  # folded forward, or none were saved
                    chat.checkpoints.changed(1)
                    chat.save_views()
                if search:
                    chat.keep_search_index()
        except BaseException:
            store.close()
            raise
        return chat

    def save_folded_views(self) -> bool:
        """A reader that had to fold the views saves them when no process owns the chat and
        the log is still as it read it (SPEC §3.6); whether it did. Once is enough."""
        if self._folded is None or self.store.closed:
            return False
        saved = self.store.save_views_unowned(self.core.saved(), self._folded[0])
        if saved:
            self._folded = None
        return saved

    def keep_search_index(self) -> None:
        """Add each message and summary to `index/search.sqlite` as it is logged. An index that
        cannot be opened is a warning: a search opens it again, and says why it cannot."""
        from evertalk.store.search_index import SearchIndex

        self.search_enabled = True
        try:
            self.search = SearchIndex.open(self.files.path, self.warnings)
        except StoreError as error:
            self.warnings.append(str(error))

    @property
    def files(self) -> ChatStore:
        """The chat folder's store, for what only it does (search, forget, repairs); a
        StoreError for a chat kept elsewhere."""
        store = self.store
        if not isinstance(store, ChatStore):
            raise StoreError(f"{self.kept_where}: this works on a chat kept in files only")
        return store

    @property
    def kept_where(self) -> str:
        """Where the chat is kept, as said to the user."""
        return f"the chat at {self.store.path}"

    @property
    def broken(self) -> str | None:
        """Why the chat takes no more changes until it is reopened (see above), or None."""
        return self._broken or self.store.must_reopen

    def close(self) -> None:
        """Save the views if they changed since the last checkpoint, then close the store. A
        failed save only means a longer fold at the next open (SPEC §3.6 step 3)."""
        try:
            if not self.store.closed and not self.readonly and self.broken is None:
                self.save_views()
        except StoreError as error:
            self.warnings.append(str(error))
        finally:
            if self.search is not None:
                self.search.close()
            self.store.close()

    # -- writing --------------------------------------------------------------------------

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
    def _stops_on_failure(self) -> Iterator[None]:
        """A store write that fails and leaves the store wanting a reopen says what comes next."""
        try:
            yield
        except StoreError as error:
            if self.store.must_reopen is None:
                raise
            raise StoreError(f"{error}; {REOPEN_ADVICE}") from None

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

    # -- on an event loop -----------------------------------------------------------------
    # A chat kept in a database does its I/O in a thread of its own (shared_chat.py), and the
    # service awaits these instead of the calls they are named after, or before the calls that
    # read. A chat kept in files does what it did: its writes are a local append and fsync.

    async def alog_message(self, message: NewMessage) -> list[int]:
        """`log_message`, awaited."""
        return self.log_message(message)

    async def abuild(self, node: Node, text: str) -> None:
        self.build(node, text)

    async def acut(self, node: Node) -> None:
        self.cut(node)

    async def afail(self, node: Node) -> None:
        self.fail(node)

    async def aclaim(self, node: Node) -> bool:
        return self.claim(node)

    async def afollow(self) -> list[int]:
        return self.follow()

    async def aready(self, key: str | None = None) -> None:
        """Before a message is held: the database, if any, is reachable, and `logged(key)`
        will answer without it."""
        del key

    async def aread_records(self, start: int, stop: int) -> None:
        """Read messages start … stop − 1 ahead, for `record` to find them."""
        del start, stop

    async def aread_texts(self, nodes: Iterable[Node]) -> None:
        """Read the texts of these nodes ahead, for `text_of` and `line_of` to find them."""
        del nodes

    async def aread_inputs(self, node: Node) -> None:
        """Read ahead what a compaction of `node` reads: its input and its context."""
        del node

    async def aread_zoom(self, start: int, count: int) -> None:
        """Read ahead what `zoom(start, count)` reads."""
        del start, count

    async def alogged_keys(self, keys: Iterable[str]) -> None:
        """Look these keys up ahead, for `logged` to answer."""
        del keys

    def turn_log(self) -> MessageLog:
        """The log a turn writes to."""
        return self

    async def flushed(self) -> None:
        """Once what the turns wrote to `turn_log` is logged."""

    def reachable(self) -> None:
        """Nothing; for a chat in a database, a StoreError when it was found unreachable
        last and has not been reached since."""

    # -- other machines (a chat kept in files has none: see shared_chat.py) ---------------

    def follow(self) -> list[int]:
        """Fold in what other machines changed since; the ids of the messages they logged."""
        return []

    def usage_copy(self) -> Callable[[str], None] | None:
        """Where the ledger's records go besides the home's file (None: nowhere)."""
        return None

    def claim(self, node: Node) -> bool:
        """Whether this machine may build `node` now (no other builds it)."""
        del node
        return True

    def release(self, node: Node) -> None:
        """This machine does not build `node` after all (its call failed)."""
        del node

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
        """A built node's text: from the core when it holds it, else from the texts kept, else
        from the store (then kept: a built node never changes)."""
        if not self.core.tree.is_built(node):
            return None
        held = self.core.tree.text_of(node)
        if held is not None:
            return held
        kept = self._texts
        text = kept.get(node)
        if text is not None:
            kept.move_to_end(node)
            return text
        record = self.store.read_node(node[0], node[1])
        if record is None:
            return None
        self._keep_text(node, record.text)
        return record.text

    def _keep_text(self, node: Node, text: str) -> None:
        kept = self._texts
        kept[node] = text
        if len(kept) > TEXTS_KEPT:
            kept.popitem(last=False)

    def _texts_to_read(self, nodes: Iterable[Node]) -> list[Node]:
        """The built nodes among `nodes` whose texts neither the core nor the chat holds."""
        tree, kept = self.core.tree, self._texts
        return [n for n in nodes if tree.is_built(n) and tree.text_of(n) is None and n not in kept]

    def line_of(self, node: Node) -> str | None:
        """A built node's rendered line (`id+n|text`), None for an unbuilt node; kept, so that
        rendering a view reads nothing from disk and flattens nothing again."""
        lines = self._lines
        line = lines.get(node)
        if line is not None:
            lines.move_to_end(node)
            return line
        text = self.text_of(node)
        if text is None:
            return None
        line = lines[node] = render_line(node, text)
        if len(lines) > TEXTS_KEPT:
            lines.popitem(last=False)
        return line

    def render_view(self) -> str:
        return self._render(self.core.view)

    def render_cview(self) -> str:
        return self._render(self.core.cview)

    def _render(self, nodes: Iterable[Node]) -> str:
        line_of = self.line_of
        return frame(line_of(node) or render_line(node, None) for node in nodes)

    def zoom(self, start: int, count: int) -> str:
        """`zoom(id, n)` of SPEC §6.5: a node's two halves, or message `id` whole when n = 1."""
        node = self.zoom_node(start, count)
        if count == 1:
            record = self.record(start)
            return f"{start}+1|{zoomed_message(record.kind, record.text)}"
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
        return format_date(self.record(i).date)

    @property
    def folder(self) -> Path:
        """The chat's folder, where the services beside it keep their files."""
        return self.store.path

    def record(self, i: int) -> MessageRecord:
        """Message `i` of the log (a StoreError if it cannot be read)."""
        return self.store.read_message(i)

    def records(self, start: int, stop: int) -> list[MessageRecord]:
        """Messages `start` up to (not with) `stop` of the log, in order."""
        return [self.record(i) for i in range(start, stop)]

    def logged(self, key: str) -> bool:
        """Whether a message sent with `key` is in the log."""
        return self.store.logged(key)

    @property
    def view_size(self) -> int:
        """The view's size in bytes, as the core counts it."""
        return self.core.view.size

    def view_nodes(self) -> list[Node]:
        """The view's nodes, oldest first."""
        return list(self.core.view.nodes())

    @property
    def view_ceiling(self) -> int:
        """The most bytes the view may hold before it merges (the budget's ceiling)."""
        return self.core.budget.ceiling

    def is_built(self, node: Node) -> bool:
        """Whether `node` has its summary (built or cut)."""
        return self.core.tree.is_built(node)

    def summaries_to_go(self, room: int) -> int:
        """About how many summaries are still to be built before the view fits `room` bytes."""
        core = self.core
        return summaries_to_go(core.view, core.t, core.tree, room)

    def fit_view(self, room: int, keep: int = 0) -> Fitted:
        """The view as a turn may send it in `room` bytes (`memory.coarse.fit`); `keep`: the
        coarse end of the copy sent last."""
        core = self.core
        return fit(core.view, core.t, core.tree, room, core.budget, keep)

    def sent_size(self, lines: Iterable[Node]) -> int:
        """The bytes these lines take rendered, as the tree stands now."""
        return rendered_size(lines, shown_size(self.core.tree))

    def unbuilt_count(self) -> int:
        """How many nodes of the tree wait for a summary."""
        return self.core.tree.unbuilt_count()

    def ready_leaves(self) -> list[int]:
        """The leaves whose summaries may start now (SPEC §4.2's queue)."""
        return self.core.queues.ready_leaves(self.core.tree)

    def batch_parents(self) -> list[Node]:
        """The parents a batch of built leaves makes ready to merge."""
        return self.core.batch_parents()

    def first_merge(self, skip: set[Node]) -> Node | None:
        """The oldest merge that may start, other than those in `skip`."""
        return self.core.queues.first_merge(self.core.tree, skip)

    def may_build(self, node: Node) -> bool:
        """Whether nothing stops `node` from being built now."""
        return self.core.pending_error(node) is None

    def context_of(self, node: Node) -> list[Node]:
        """The lines a compaction of `node` may show the model as what came before it."""
        return self.core.context(node)

    def builds_to_go(self) -> int:
        """The summaries that will need a model call: every unbuilt leaf and every merge whose
        halves are built."""
        return self.core.tree.unbuilt_count(0) + self.core.queues.merge_count()

    def catch_up(self) -> CatchUp:
        """How far the memory is behind the log (SPEC §3.7)."""
        return self.core.catch_up()

    def status(self) -> Status:
        core, flags = self.core, self.core.tree.flags
        counts = [sum(row.count(flag) for row in flags) for flag in (BUILT, FREE, CUT, UNBUILT)]
        last = self.record(core.t - 1).date if core.t else None
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


REOPEN_ADVICE = (
    "the chat takes no changes until it is reopened, which the service does by itself once "
    "the disk takes writes again"
)


def broken_error(reason: str) -> StoreError:
    """The error of a change to a chat that must be reopened first (Chat.broken)."""
    return StoreError(f"{reason}; {REOPEN_ADVICE}")


def format_date(iso: str) -> str:
    """`2026-10-08 Thursday 14:03:22 +02:00`, in the current local time zone."""
    moment = datetime.fromisoformat(iso).astimezone()
    offset = moment.strftime("%z")
    return moment.strftime("%Y-%m-%d %A %H:%M:%S ") + f"{offset[:3]}:{offset[3:]}"


def _resume(
    store: ChatStorage, budget: Budget | None
) -> tuple[MemoryCore, list[Built], str | None, SavedViews | str | None]:
    """The core, the free nodes it had to build, a warning, and what view.json held (the views,
    None when missing, why it is unreadable). `budget` None: the one view.json records (a reader
    that knows no model keeps the views as they are)."""
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
        return core, built, f"{saved}: folded the views again from message 0", saved
    if budget is None and saved is not None and saved.budget is not None:
        budget = Budget(*saved.budget)
    core, built, warning = MemoryCore.resume(tree, saved, budget)
    return core, built, warning, saved


def _load_tree(store: ChatStorage) -> Tree:
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
