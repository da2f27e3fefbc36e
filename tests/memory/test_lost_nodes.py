"""Nodes whose records were lost from the tree file while records built on them remain (a damaged
line): the core builds the lost ones again, free ones at once, and leaves every node that is
still built as it is (SPEC §2.4: built once)."""

from __future__ import annotations

from core_history import History
from hypothesis import given, settings
from hypothesis import strategies as st
from test_core_laws import KINDS, line_texts, message_texts

from budget import examples
from evertalk.memory import Budget, MemoryCore
from evertalk.memory.nodes import Node, exists
from evertalk.memory.tree import FREE, UNBUILT

BUDGET = Budget(ceiling=1_000, floor=500, cceiling=700, cfloor=350, window=8)
LONG = "the restore drill took forty minutes; " * 20  # over 512 bytes: its leaf is not free


def built_nodes(core: MemoryCore) -> dict[Node, tuple[int, int]]:
    tree = core.tree
    return {
        (level, index): (flag, tree.sizes[level][index])
        for level, row in enumerate(tree.flags)
        for index, flag in enumerate(row)
        if flag != UNBUILT
    }


def held_texts_are_needed(core: MemoryCore) -> bool:
    """The core keeps a built node's text only while its parent may still need it."""
    tree = core.tree
    return not any(tree.built_at(level + 1, index >> 1) for level, index in tree.texts)


def finish(history: History) -> None:
    """Build every ready node until none is left; nothing may raise."""
    core = history.core
    for _ in range(4 * core.t + 4):
        ready = core.ready()
        if not ready:
            return
        for node in ready:
            history.build(node, f"line {node}")
    raise AssertionError("the ready work never ran out")


@settings(max_examples=examples(150), deadline=None)
@given(st.data())
def test_lost_records_are_built_again_and_built_parents_stay(data: st.DataObject) -> None:
    history = History(BUDGET)
    for _ in range(data.draw(st.integers(1, 24), label="messages")):
        history.append(data.draw(st.sampled_from(KINDS)), data.draw(message_texts()))
        for node in history.core.ready():
            if data.draw(st.booleans()):
                history.build(node, data.draw(line_texts()))
    before = built_nodes(history.core)
    lost = data.draw(st.sets(st.sampled_from(sorted(before))), label="lost") if before else set()
    saved = history.core.saved() if data.draw(st.booleans()) else None

    core, built, _ = history.reopen(lost, saved)
    history.core = core
    history.record(built)

    kept = {node: state for node, state in before.items() if node not in lost}
    after = built_nodes(core)
    assert {node: after[node] for node in kept} == kept
    for b in built:  # only lost free nodes come back by themselves, exactly as they were
        assert b.node in lost and b.flag == FREE and before[b.node][0] == FREE
        assert b.text == history.texts[b.node]
    for level, index in lost - set(after):  # a free one waits only for a lost source
        if before[(level, index)][0] == FREE:
            children = [(level - 1, 2 * index), (level - 1, 2 * index + 1)]
            assert level and not all(core.tree.is_built(child) for child in children)
    assert held_texts_are_needed(core)

    finish(history)
    final = built_nodes(core)
    assert {node: final[node] for node in kept} == kept
    assert all(
        exists((level, index), core.t)
        for level, row in enumerate(core.tree.flags)
        for index in range(len(row))
    )
    assert all(flag != UNBUILT for row in core.tree.flags for flag in row)
    assert held_texts_are_needed(core)


def test_a_lost_free_leaf_under_a_built_parent_is_built_again_alone() -> None:
    """The reviewer's chat: the record of free leaf (0, 3) lost, parent (1, 1) kept."""
    history = History(BUDGET)
    for kind, text in [("user", LONG), ("ever", LONG), ("user", LONG), ("ever", "ok reply")]:
        history.append(kind, text)
    for index in range(3):
        history.build((0, index), f"summary {index} " + "s" * 150)
    assert history.core.tree.flags[1] == bytearray([FREE, FREE])
    assert history.core.tree.flags[2] == bytearray([FREE])
    core, built, warning = history.reopen({(0, 3)}, history.core.saved())
    assert [(b.node, b.text, b.flag) for b in built] == [((0, 3), "ever: ok reply", FREE)]
    assert warning is None and core.ready() == []
    assert core.tree.flags == [
        bytearray([1, 1, 1, FREE]),
        bytearray([FREE, FREE]),
        bytearray([FREE]),
    ]
    assert held_texts_are_needed(core)


def test_a_lost_model_leaf_under_a_built_parent_is_queued_and_its_build_stops_there() -> None:
    history = History(BUDGET)
    for kind in ("user", "ever"):
        history.append(kind, LONG)
    history.build((0, 0), "first " + "s" * 150)
    history.build((0, 1), "second " + "s" * 150)  # makes the free parent (1, 0)
    parent = history.core.tree.sizes[1][0]
    core, built, _ = history.reopen({(0, 0)}, history.core.saved())
    assert built == [] and core.ready() == [(0, 0)]
    assert core.build((0, 0), "first, summarized again") == []  # (1, 0) is not made again
    assert core.tree.flags == [bytearray([1, 1]), bytearray([FREE])]
    assert core.tree.sizes[1][0] == parent
    assert core.ready() == [] and held_texts_are_needed(core)
