"""Where a machine's open of a shared chat starts: the tree as it stood at the change its saved
views were folded up to, and the changes since, to be folded as every machine folded them.

The views depend on what was built at each message, so views saved at one change and folded on
with the nodes built now would differ from the other machines'. The open therefore takes the
tree's shape as it was at the saved views' change (`as_of`: the messages logged since and the
nodes stored since left out) and folds the changes after it in order, each with what was built
by then. No I/O here: the snapshot is read by `PgChat.snapshot`.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable
from dataclasses import dataclass

from evertalk.memory.core import SavedViews
from evertalk.memory.tree import FREE, UNBUILT
from evertalk.pgstore.chats import Change
from evertalk.pgstore.nodes import NodeShape
from evertalk.pgstore.pgchat import Snapshot


@dataclass(frozen=True)
class Opening:
    """The chat as the core opens it: `t` messages, the shape and views as of change `seq`, and
    the changes after it (up to the snapshot's), in order."""

    t: int
    seq: int
    shape: NodeShape
    views: SavedViews | str | None
    changes: tuple[Change, ...]


def opening(snapshot: Snapshot) -> Opening:
    """Where to open: at the saved views' change when they name one; else (none saved, saved
    unreadable, or saved before views named their change) at the snapshot, as a chat in files
    opens (SPEC §3.6)."""
    views, at = snapshot.views, snapshot.views_seq
    if at is None or not isinstance(views, SavedViews) or views.t > snapshot.t:
        return Opening(snapshot.t, snapshot.seq, snapshot.shape, views, ())
    shape = as_of(snapshot.shape, views.t, snapshot.changes)
    return Opening(views.t, at, shape, views, snapshot.changes)


def as_of(shape: NodeShape, t: int, since: Iterable[Change]) -> NodeShape:
    """The shape of a chat of `t` messages before the changes `since` were made: the nodes over
    later messages dropped, and those the changes stored unbuilt again, with each free node
    above them (derived from them, so derived after them). A copy: `shape` is left as it is."""
    levels = t.bit_length()
    sizes = [shape.sizes[level][: t >> level] for level in range(min(levels, len(shape.sizes)))]
    flags = [shape.flags[level][: t >> level] for level in range(min(levels, len(shape.flags)))]
    for change in since:
        for level, index in change.what.get("nodes", ()):
            _unbuild(sizes, flags, int(level), int(index))
    return NodeShape(sizes, flags)


def _unbuild(sizes: list[array[int]], flags: list[bytearray], level: int, index: int) -> None:
    """Node (level, index) unbuilt, then each free parent above it."""
    while level < len(flags) and index < len(flags[level]) and flags[level][index] != UNBUILT:
        flags[level][index] = UNBUILT
        sizes[level][index] = 0
        level, index = level + 1, index >> 1
        if level >= len(flags) or index >= len(flags[level]) or flags[level][index] != FREE:
            return
