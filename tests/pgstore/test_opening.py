"""The tree as it stood at a saved change (`pgstore/opening.py`): later messages' nodes dropped,
the nodes stored since unbuilt with the free nodes above them, and the rest as it is."""

from __future__ import annotations

from array import array

from evertalk.memory.core import SavedViews
from evertalk.memory.tree import BUILT, FREE, UNBUILT
from evertalk.pgstore.chats import Change
from evertalk.pgstore.nodes import NodeShape
from evertalk.pgstore.opening import as_of, opening
from evertalk.pgstore.pgchat import Snapshot


def shape(flags: list[list[int]]) -> NodeShape:
    return NodeShape(
        [array("I", [10 * (f != UNBUILT) for f in row]) for row in flags],
        [bytearray(row) for row in flags],
    )


def test_the_nodes_stored_since_are_unbuilt_with_the_free_ones_above_them() -> None:
    now = shape(
        [
            [FREE, BUILT, FREE, FREE, FREE, FREE, BUILT, UNBUILT],  # 8 messages
            [FREE, FREE, BUILT, UNBUILT],
            [FREE, UNBUILT],
            [UNBUILT],
        ]
    )
    since = [Change(9, "office", {"nodes": [[0, 1]]}), Change(10, "home", {"append": [7, 1]})]
    then = as_of(now, 7, since)
    assert [list(row) for row in then.flags] == [
        [FREE, UNBUILT, FREE, FREE, FREE, FREE, BUILT],  # leaf 1 built since; 7 logged since
        [UNBUILT, FREE, BUILT],  # derived from leaf 1
        [UNBUILT],
    ]
    assert list(then.sizes[1]) == [0, 10, 10]
    assert list(now.flags[0])[1] == BUILT  # the snapshot's own shape is left as it was


def test_views_saved_before_they_named_their_change_open_at_the_snapshot() -> None:
    views = SavedViews(2, [(0, 0), (0, 1)], None, False, False)
    now = shape([[FREE, FREE, FREE], [FREE]])
    old = opening(Snapshot(3, 5, now, views, None, ()))
    assert (old.t, old.seq, old.changes) == (3, 5, ())
    since = (Change(5, "home", {"append": [2, 1]}),)
    new = opening(Snapshot(3, 5, now, views, 4, since))
    assert (new.t, new.seq, new.changes) == (2, 4, since)
    assert [list(row) for row in new.shape.flags] == [[FREE, FREE], [FREE]]
