"""Forgetting on disk (SPEC §12): the one change to what was written.

A forget is planned on an owned store (what changes, where it lies), then applied in an order
that leaves a chat that opens at every step, so that a crash at any moment costs nothing but
running the forget again:

1. the index's checkpoint goes: a crash from here on makes the next open build it again from
   the log (the one case where a forget costs O(size));
2. view.json gets the fixed-up views, which name only nodes that stay built;
3. with the search database's write lock held (no other process's catch-up reads a file being
   replaced), each day file holding a changed message is rewritten atomically (a new file
   beside it, fsynced, renamed over it, the folder fsynced): the old file or the new one, never
   a mix; then each tree file holding a dropped node, the same way without its records;
4. the index follows the rewritten files alone (their records' locations, the dropped nodes
   unbuilt) and is checkpointed again: one day file and the tree files over the message, never
   the whole log;
5. the search database's rows change or go, its offsets in the rewritten tree files move, and
   it is compacted (a database that cannot be fixed up is removed: a search builds it again);
6. images no message uses any more and the other copies under the home follow (`copies.py`).

What is sought in each text is a `Finder`'s (`finder.py`): a text in any escaping, inside the
JSON of a tool call's input, and across the pages of a long message.

Running it again finds the messages changed already (their text stays) and drops the nodes over
them again, whatever of the tree a crash left: the tree is always built again from what is now
below it. The caller closes the chat without saving its views and opens it again.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from evertalk.memory.core import SavedViews
from evertalk.memory.forget import dropped_nodes, fix_saved, rebuild_calls, staying
from evertalk.memory.nodes import Node
from evertalk.memory.tree import FREE
from evertalk.store import views
from evertalk.store.chat_dir import ChatStore
from evertalk.store.checkpoint import INDEX_DIR
from evertalk.store.copies import Scrub, scrub_copies
from evertalk.store.edits import record_edit
from evertalk.store.errors import StoreError
from evertalk.store.finder import Finder, input_strings
from evertalk.store.line_files import parse_object
from evertalk.store.records import MessageRecord, decode_message, decode_node, encode_message
from evertalk.store.rewrite import Rewrite
from evertalk.store.search_db import remove
from evertalk.store.search_index import SEARCH_NAME, SearchIndex
from evertalk.store.secure import write_atomic
from evertalk.store.sqlite_lib import sqlite3
from evertalk.terminal_text import counted

FORGOTTEN = "[forgotten on "
"""How every forgotten message's text begins: `[forgotten on 2026-12-05]`, with the reason
after a colon when one was given."""

DAMAGED_NOTE = re.compile(
    r"\[damaged\] Message \d+ could not be read: line (\d+) of (\S+) was damaged \(.*\)\. "
    r"The file as it was is kept in (\S+)\.",
    re.S,
)
"""The note a repair puts in place of a damaged line (repair.py), which names the copy of it."""


def marker(day: str, reason: str | None) -> str:
    """The text of a forgotten message (SPEC §12)."""
    reason = " ".join((reason or "").split())
    return f"{FORGOTTEN}{day}: {reason}]" if reason else f"{FORGOTTEN}{day}]"


@dataclass(frozen=True)
class Change:
    """One message as it will be: its old record, its new text and whether its images go."""

    before: MessageRecord
    text: str
    drop_images: bool

    @property
    def record(self) -> bytes:
        old = self.before
        images = None if self.drop_images else old.images
        return encode_message(
            old.i, old.kind, self.text, old.date, old.key, images, old.agent, old.page, old.failed
        )


@dataclass
class Plan:
    """What a forget changes, found before anything is written (the preview shows it)."""

    changes: dict[int, Change]
    dropped: list[Node]
    calls: int
    """About how many model calls building the dropped nodes again costs."""
    message_files: dict[str, list[int]]
    """Day files (relative to the chat folder) and the ids rewritten in each."""
    node_files: dict[str, list[Node]]
    views: SavedViews | None
    """The fixed-up views, None when view.json is missing or unreadable (the open folds)."""
    scrub: Scrub
    """For the other copies under the home (copies.py)."""
    images: list[str] = field(default_factory=list)
    """Images of the changed messages that go."""

    @property
    def search_rows(self) -> int:
        """Rows of the search database that hold what changes: the messages and the
        summaries the model wrote (free and cut ones are not indexed)."""
        return len(self.changes) + self.calls


def past_the_end(t: int) -> str:
    """Why a message past the end of a chat of `t` messages cannot be named: what it holds."""
    if not t:
        return "the chat has no messages yet"
    return f"the chat has {counted(t, 'message')}, 0–{t - 1}"


def plan_forget(store: ChatStore, first: int, last: int, text: str) -> Plan:
    """Plan forgetting messages `first` … `last`, whole (every page of a long message): each
    text becomes `text` and its images go. A message forgotten before keeps its marker."""
    t = store.message_count
    if not 0 <= first <= last < t:
        raise StoreError(past_the_end(t))
    first, last = _whole(store, first), _whole(store, last, end=True)
    changes = {}
    for i in range(first, last + 1):
        record = store.read_message(i)
        kept = record.text if record.text.startswith(FORGOTTEN) else text
        changes[i] = Change(record, kept, True)
    images = sorted({name for c in changes.values() for name in c.before.images or ()})
    before = [c.before for c in changes.values() if not c.before.text.startswith(FORGOTTEN)]
    texts = [r.text for r in before]
    texts += [s for r in before if r.kind == "tool" for s in input_strings(r.text)]
    records = {i: change.record for i, change in changes.items()}
    named = {where: r.i for r in before if (where := _named_line(r.text)) is not None}
    scrub = Scrub(Finder.texts(texts, text), records, named)
    return _plan(store, changes, [], scrub, images)


def plan_edit(
    store: ChatStore, messages: Iterable[MessageRecord], nodes: Iterable[Node], finder: Finder
) -> Plan:
    """Plan a redaction: each of `messages` (in order) gets what `finder` finds in it replaced,
    the pages of a long message as one text, and keeps its images; `nodes` are the built nodes
    whose own text `finder` changes."""
    changes = {}
    for pages in _whole_messages(messages):
        texts = finder.replace_pages([record.text for record in pages])
        for record, text in zip(pages, texts, strict=True):
            if text != record.text:
                changes[record.i] = Change(record, text, False)
    return _plan(store, changes, list(nodes), Scrub(finder), [])


def _whole_messages(records: Iterable[MessageRecord]) -> Iterator[list[MessageRecord]]:
    """The records grouped by message: a long message's pages together."""
    pages: list[MessageRecord] = []
    for record in records:
        page = record.page
        if pages and (page is None or page.part == 0):
            yield pages
            pages = []
        pages.append(record)
        if page is None or page.part == page.parts - 1:
            yield pages
            pages = []
    if pages:
        yield pages


def _named_line(text: str) -> tuple[str, int] | None:
    """The copy of a damaged line that a repair's note names: (file, line number)."""
    found = DAMAGED_NOTE.fullmatch(text)
    if found is None:
        return None
    lineno, name, folder = found.groups()
    return f"{folder}/{name}", int(lineno)


def _plan(
    store: ChatStore,
    changes: dict[int, Change],
    nodes: list[Node],
    scrub: Scrub,
    images: list[str],
) -> Plan:
    built_at = _built(store)
    dropped = dropped_nodes(changes, nodes, store.message_count, built_at)
    calls = rebuild_calls(dropped, FREE, lambda node: store.node_flag(*node))
    message_files: dict[str, list[int]] = defaultdict(list)
    for i in changes:
        message_files[_file_of(store.message_location(i), f"message {i}")].append(i)
    node_files: dict[str, list[Node]] = defaultdict(list)
    for node in dropped:
        node_files[_file_of(store.node_location(*node), f"node {node}")].append(node)
    saved = store.load_views()
    fixed = fix_saved(saved, staying(built_at, dropped)) if isinstance(saved, SavedViews) else None
    return Plan(
        changes, dropped, calls, dict(message_files), dict(node_files), fixed, scrub, images
    )


def apply(store: ChatStore, plan: Plan) -> None:
    """Write the planned forget (see the module's text) while `store` holds the chat's lock.
    The store takes no more changes afterwards: the chat must be opened again."""
    chat_dir = store.path
    if not plan.changes and not plan.dropped:  # only other copies hold it: the log stays
        scrub_copies(chat_dir.parent, plan.scrub, plan.images)
        return
    store.invalidate("a forget rewrote the log")  # a crash from here on: the next open rebuilds
    if plan.changes:  # told to the windows before the text goes (store/edits.py)
        record_edit(chat_dir, plan.changes)
    if plan.views is not None:
        views.save_views(chat_dir, plan.views)
    search = _held_search(store)
    try:
        rewrites = [
            _rewrite_messages(chat_dir, name, {i: plan.changes[i] for i in ids})
            for name, ids in plan.message_files.items()
        ]
        gone = set(plan.dropped)
        rewrites += [_rewrite_tree(chat_dir, name, gone) for name in plan.node_files]
        store.rewrote(rewrites)  # only these files' records: never the whole log
    except BaseException:
        if search is not None:
            search.release()
            search.close()
        raise
    if search is not None:
        _forget_rows(search, store, plan, rewrites)
    scrub_copies(chat_dir.parent, plan.scrub, plan.images)


def _held_search(store: ChatStore) -> SearchIndex | None:
    """The search database with its write lock held, None when there is none (or it cannot
    be used: it is removed then, and a search builds it again from the log)."""
    chat_dir = store.path
    path = chat_dir / INDEX_DIR / SEARCH_NAME
    if not path.is_file():
        remove(path)  # a write-ahead log left without its database
        return None
    try:
        search = SearchIndex.open(chat_dir)
    except StoreError:
        remove(path)
        return None
    try:
        search.hold(store)
    except (sqlite3.Error, StoreError, OSError):
        search.close()
        remove(path)
        return None
    return search


def _forget_rows(
    search: SearchIndex, store: ChatStore, plan: Plan, rewrites: list[Rewrite]
) -> None:
    try:
        search.forget(store, sorted(plan.changes), plan.dropped, rewrites)
    except (sqlite3.Error, StoreError, OSError):
        search.close()
        remove(search.path)  # it could not be fixed up: what is gone cannot hold the text
        return
    search.close()


def _rewrite_messages(chat_dir: Path, name: str, changes: dict[int, Change]) -> Rewrite:
    path = chat_dir / name
    old = path.read_bytes()
    lines = old.split(b"\n")
    spans: list[tuple[int, int, int, int]] = []
    before = after = 0
    for n, line in enumerate(lines):
        parsed = parse_object(line) if line else None
        record = decode_message(parsed) if isinstance(parsed, dict) else None
        length = len(line) + 1
        if record is not None and record.i in changes:
            lines[n] = changes[record.i].record
        if record is not None and n < len(lines) - 1:  # the last piece has no newline
            spans.append((record.i, before, after, len(lines[n]) + 1))
        before, after = before + length, after + len(lines[n]) + 1
    new = b"\n".join(lines)
    write_atomic(path, new)
    return Rewrite(name, len(new) - len(old), spans, [], [], [])


def _rewrite_tree(chat_dir: Path, name: str, gone: set[Node]) -> Rewrite:
    path = chat_dir / name
    old = path.read_bytes()
    lines = old.split(b"\n")
    kept: list[bytes] = []
    nodes: list[tuple[int, int, int, int, int]] = []
    removed: list[tuple[int, int]] = []
    dropped: list[Node] = []
    before = after = 0
    for n, line in enumerate(lines):
        parsed = parse_object(line) if line else None
        node = decode_node(parsed) if isinstance(parsed, dict) else None
        length = len(line) + 1
        if node is not None and (node.l, node.i) in gone and n < len(lines) - 1:
            removed.append((before, length))
            dropped.append((node.l, node.i))
        else:
            kept.append(line)
            if node is not None and n < len(lines) - 1:
                nodes.append((node.l, node.i, before, after, length))
            after += length
        before += length
    new = b"\n".join(kept)
    write_atomic(path, new)
    return Rewrite(name, len(new) - len(old), [], nodes, removed, dropped)


def _whole(store: ChatStore, i: int, *, end: bool = False) -> int:
    """The first (or with `end`, the last) id of the message whose page i is."""
    page = store.read_message(i).page
    if page is None:
        return i
    return i - page.part + (page.parts - 1 if end else 0)


def _built(store: ChatStore) -> Callable[[int, int], bool]:
    flags = store.node_flags()

    def built_at(level: int, index: int) -> bool:
        return level < len(flags) and 0 <= index < len(flags[level]) and flags[level][index] != 0

    return built_at


def _file_of(location: object, what: str) -> str:
    name = getattr(location, "file", None)
    if not isinstance(name, str):
        raise StoreError(f"the index does not say where {what} is")
    return name


__all__ = ["FORGOTTEN", "Change", "Plan", "apply", "marker", "plan_edit", "plan_forget"]
