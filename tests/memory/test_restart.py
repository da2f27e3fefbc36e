"""Reopening the core (SPEC §3.6, law 8): saved views loaded, caught up, or folded again."""

from __future__ import annotations

from array import array
from dataclasses import replace
from typing import Any

import pytest
from memory_reference import RefCore, coarsens, tiles
from test_core_laws import full_state as state

from evertalk.memory import Budget, MemoryCore
from evertalk.memory.core import SavedViews
from evertalk.memory.tree import FREE, UNBUILT, Built, Tree
from evertalk.memory.view import render

Node = tuple[int, int]
BUDGET = Budget(ceiling=1_000, floor=500, cceiling=700, cfloor=350, window=8)


class Chat:
    """A core and the reference fed the same events; the texts are recorded here, as a store
    would keep them, so that the core can be reopened from its arrays."""

    def __init__(self, budget: Budget = BUDGET) -> None:
        self.budget = budget
        self.core = MemoryCore(budget)
        b = budget
        self.ref = RefCore(b.ceiling, b.floor, b.cceiling, b.cfloor, b.window)

    def append(self, text: str, kind: str = "user") -> list[Built]:
        built = self.core.append(kind, text)
        assert [(b.node, b.text, b.flag) for b in built] == self.ref.append(kind, text)
        return built

    def build(self, node: Node, text: str) -> None:
        built = self.core.build(node, text)
        assert [(b.node, b.text, b.flag) for b in built] == self.ref.build(node, text)

    def arrays(self) -> tuple[int, list[array[int]], list[bytearray]]:
        tree = self.core.tree
        return tree.t, [array("I", r) for r in tree.sizes], [bytearray(r) for r in tree.flags]

    def reopen(
        self, saved: SavedViews | None, arrays: Any = None, budget: Budget | None = None
    ) -> tuple[MemoryCore, list[Built], str | None]:
        t, sizes, flags = arrays or self.arrays()
        tree = Tree.from_arrays(t, sizes, flags)
        nodes, leaves = tree.wanted()
        tree.supply({n: self.ref.texts[n] for n in nodes}, {i: self.ref.inputs[i] for i in leaves})
        return MemoryCore.resume(tree, saved, budget or self.budget)

    def render(self, core: MemoryCore, cview: bool = False) -> str:
        return render((core.cview if cview else core.view).nodes(), self.ref.texts.get)


def ref_state(ref: RefCore) -> tuple[Any, ...]:
    return (ref.t, ref.view, ref.shrinking, ref.cview, ref.cshrinking, ref.ready())


def core_state(core: MemoryCore) -> tuple[Any, ...]:
    return (
        core.t,
        core.view.nodes(),
        core.view.shrinking,
        core.cview.nodes(),
        core.cview.shrinking,
        core.ready(),
    )


def assert_valid(core: MemoryCore) -> None:
    view, cview = core.view.nodes(), core.cview.nodes()
    assert tiles(view, core.t) and tiles(cview, core.t) and coarsens(cview, view)
    for lines, current in ((view, core.view), (cview, core.cview)):
        total = 0
        for level, index in lines:
            flag = core.tree.flags[level][index]
            assert level == 0 or flag != UNBUILT
            total += 29 if flag == UNBUILT else core.tree.sizes[level][index]
        assert current.size == total


# -- a batch left open -----------------------------------------------------------------------


def open_batch(chat: Chat) -> None:
    for t in range(4):
        chat.append("m" * 600)
        chat.build((0, t), "s" * 300)  # parents of 300 + 1 + 300 bytes are not free
    chat.append("m" * 600)  # 4·300 + 29 > 1,000 and no parent is built: the batch stays open
    assert chat.core.view.size == 1_229 and chat.core.view.shrinking
    assert not chat.core.merged
    assert chat.core.ready() == [(0, 4), (1, 0), (1, 1)]


def test_open_batch_survives_a_restart_and_goes_on_as_live() -> None:
    live, other = Chat(), Chat()
    open_batch(live)
    open_batch(other)
    core, built, warning = other.reopen(other.core.saved())
    assert built == [] and warning is None
    other.core = core
    assert state(other.core) == state(live.core)
    assert other.render(other.core) == live.render(live.core)
    assert other.render(other.core, cview=True) == live.render(live.core, cview=True)
    assert other.core.view.shrinking

    def both(event: str, *args: Any) -> None:
        for chat in (live, other):
            getattr(chat, event)(*args)
            assert core_state(chat.core) == ref_state(chat.ref)
        assert state(other.core) == state(live.core)

    both("build", (1, 1), "p" * 200)  # nothing merges on a build
    assert live.core.view.nodes() == [(0, i) for i in range(5)] and live.core.view.shrinking
    both("append", "m" * 600)  # the batch goes on: 2–3 merge, still over the floor
    assert live.core.view.nodes() == [(0, 0), (0, 1), (1, 1), (0, 4), (0, 5)]
    assert live.core.view.shrinking and live.core.merged
    both("append", "m" * 600)  # still blocked: nothing merges, the flag stays
    assert not live.core.merged and live.core.view.shrinking
    for _ in range(10):  # the compactor catches up; the batch ends at the floor
        for node in live.core.ready():
            both("build", node, "p" * 100)
        both("append", "m" * 600)
        if not live.core.view.shrinking:
            break
    assert live.core.merged and not live.core.view.shrinking
    assert live.core.view.size <= BUDGET.floor


def test_open_batch_continues_identically_after_restarts_at_every_step() -> None:
    """Two chats fed the same events; one is closed and reopened after every event."""
    script: list[tuple[str, Any]] = []
    for t in range(24):
        script.append(("append", "x" * (550 + 41 * t % 900)))
        if t % 3 != 2:
            script.append(("build_ready", 1 + t % 4))
    live, restarted = Chat(Budget(900, 450, 600, 300, 3)), Chat(Budget(900, 450, 600, 300, 3))
    seen_open_batch = False
    for step, (event, arg) in enumerate(script):
        for chat in (live, restarted):
            if event == "append":
                chat.append(arg)
            else:
                for node in chat.core.ready()[:arg]:
                    chat.build(node, "y" * (120 + 50 * (node[1] % 7)))
        core, built, warning = restarted.reopen(restarted.core.saved())
        assert built == [] and warning is None
        restarted.core = core
        restarted.ref.failures.clear()
        assert state(restarted.core) == state(live.core), step
        assert ref_state(live.ref) == core_state(live.core)
        seen_open_batch |= live.core.view.shrinking and not live.core.merged
    assert seen_open_batch


# -- missing or unreadable saved views ---------------------------------------------------


def some_history() -> Chat:
    chat = Chat()
    for t in range(14):
        chat.append(("é" if t % 2 else "a") * (300 + 60 * t))
        for node in chat.core.ready()[:2]:
            chat.build(node, "b" * (90 + 31 * t))
    assert any(level for level, _ in chat.core.view.nodes())
    return chat


def folded(chat: Chat) -> tuple[Any, ...]:
    ref = RefCore(BUDGET.ceiling, BUDGET.floor, BUDGET.cceiling, BUDGET.cfloor, BUDGET.window)
    ref.inputs, ref.texts, ref.flags = chat.ref.inputs, chat.ref.texts, chat.ref.flags
    ref.fold()
    return ref_state(ref)


def test_missing_view_json_folds_with_a_warning() -> None:
    chat = some_history()
    core, built, warning = chat.reopen(None)
    assert warning
    assert built == []
    assert_valid(core)
    assert core_state(core) == folded(chat)


def unreadable_cases(chat: Chat) -> dict[str, SavedViews]:
    good = chat.core.saved()
    t = good.t
    assert good.cview is not None
    unbuilt_parents = [
        (level, index)
        for level, row in enumerate(chat.core.tree.flags)
        for index, flag in enumerate(row)
        if level and flag == UNBUILT
    ]
    assert unbuilt_parents
    level, index = unbuilt_parents[0]
    named = [(0, i) for i in range(index << level)] + [(level, index)]
    named += [(0, i) for i in range((index + 1) << level, t)]
    assert tiles(named, t)
    leaves = [(0, i) for i in range(t)]
    coarse = list(good.cview)
    return {
        "t beyond the log": SavedViews(t + 1, [*good.view, (0, t)], None, False, False),
        "view with a gap": SavedViews(t, good.view[:-2] + good.view[-1:], good.cview, False, False),
        "view overlapping": SavedViews(t, [*good.view, (0, t - 1)], good.cview, False, False),
        "view short": SavedViews(t, good.view[:-1], good.cview, False, False),
        "cview not tiling": SavedViews(t, good.view, coarse[:-1], False, False),
        "unbuilt parent in view": SavedViews(t, named, named, False, False),
        "unbuilt parent in cview": SavedViews(t, leaves, named, False, False),
        "cview finer than view": SavedViews(t, good.cview, leaves, False, False),
        "not a node": SavedViews(t, [(-1, 0), *leaves], leaves, False, False),
        "negative t": SavedViews(-1, [], [], False, False),
    }


@pytest.mark.parametrize(
    "case",
    [
        "t beyond the log",
        "view with a gap",
        "view overlapping",
        "view short",
        "cview not tiling",
        "unbuilt parent in view",
        "unbuilt parent in cview",
        "cview finer than view",
        "not a node",
        "negative t",
    ],
)
def test_unreadable_view_json_folds_with_a_warning(case: str) -> None:
    chat = some_history()
    saved = unreadable_cases(chat)[case]
    core, built, warning = chat.reopen(saved)
    assert warning, case
    assert built == []
    assert_valid(core)
    assert core_state(core) == folded(chat)


def test_a_different_valid_tiling_is_kept_as_it_is() -> None:
    chat = some_history()
    t = chat.core.t
    leaves = [(0, i) for i in range(t)]
    built_pairs = [(1, j) for j in range(t // 2) if chat.core.tree.flags[1][j] != UNBUILT]
    assert built_pairs
    cview = []
    for i in range(t):
        if cview and cview[-1] == (1, i // 2):
            continue
        cview.append((1, i // 2) if (1, i // 2) in built_pairs and i + 1 < t else (0, i))
    assert tiles(cview, t) and coarsens(cview, leaves)
    assert leaves != chat.core.view.nodes()
    saved = SavedViews(t, leaves, cview, True, False)
    core, built, warning = chat.reopen(saved)
    assert warning is None and built == []
    assert core.view.nodes() == leaves and core.cview.nodes() == cview
    assert core.view.shrinking and not core.cview.shrinking
    assert core.saved() == replace(saved, budget=BUDGET.sizes())
    assert_valid(core)
    # and it goes on from there by the rules (the open batch continues at the next message)
    chat.core = core
    chat.ref.restore(t, leaves, cview, True, False)
    chat.append("z" * 700)
    assert core_state(chat.core) == ref_state(chat.ref)
    assert chat.core.merged


def test_bare_list_saved_view_fits_the_cview() -> None:
    """SPEC §3.6: a bare list is the view; the cview is that view fitted down to the cfloor."""
    chat = some_history()
    good = chat.core.saved()
    core, _, warning = chat.reopen(SavedViews(good.t, good.view, None, False, False))
    assert warning is None
    assert core.view.nodes() == good.view
    ref = chat.ref
    expected, _ = ref.fit(list(good.view), good.t, BUDGET.cfloor)
    assert core.cview.nodes() == expected
    assert core.cview.shrinking == (ref.size(expected) > BUDGET.cfloor)
    assert_valid(core)


# -- catching up --------------------------------------------------------------------------


def test_catch_up_when_view_json_is_behind_the_log() -> None:
    chat = some_history()
    saved = chat.core.saved()
    for t in range(6):
        chat.append("c" * (250 + 200 * t))  # no builds: the live steps saw what is built now
    core, built, warning = chat.reopen(saved)
    assert warning is None and built == []
    assert state(core) == state(chat.core)


def test_catch_up_uses_the_nodes_built_now() -> None:
    chat = some_history()
    saved = chat.core.saved()
    for t in range(8):
        chat.append("c" * (450 + 300 * t))
        for node in chat.core.ready()[:3]:
            chat.build(node, "d" * (200 + 40 * t))
    core, built, warning = chat.reopen(saved)
    assert warning is None and built == []
    assert saved.cview is not None
    chat.ref.restore(saved.t, saved.view, saved.cview, saved.shrinking, saved.cshrinking)
    assert core_state(core) == ref_state(chat.ref)
    assert_valid(core)


# -- free nodes lost in a crash ------------------------------------------------------------


def test_free_nodes_missing_from_the_arrays_are_rebuilt() -> None:
    chat = Chat()
    chat.append("q" * 600)
    chat.build((0, 0), "summary")
    lost = chat.append("short")  # a free leaf and the free parent it completes
    assert [(b.node, b.flag) for b in lost] == [((0, 1), FREE), ((1, 0), FREE)]
    t, sizes, flags = chat.arrays()
    for level, index in ((0, 1), (1, 0)):  # the crash came before they were written
        flags[level][index] = UNBUILT
        sizes[level][index] = 0
    tree = Tree.from_arrays(t, sizes, flags)
    nodes, leaves = tree.wanted()
    assert leaves == [1] and (0, 0) in nodes
    core, built, warning = chat.reopen(chat.core.saved(), (t, sizes, flags))
    assert warning is None
    assert built == lost
    assert state(core) == state(chat.core)


def test_missing_free_leaf_at_the_end_of_the_log() -> None:
    chat = Chat()
    for _ in range(3):
        chat.append("w" * 600)
    chat.append("tiny")
    t, sizes, flags = chat.arrays()
    flags[0][3] = UNBUILT
    sizes[0][3] = 0
    core, built, warning = chat.reopen(None, (t, sizes, flags))
    assert [(b.node, b.text, b.flag) for b in built] == [((0, 3), "user: tiny", FREE)]
    assert warning
    assert core.tree.flags[0][3] == FREE and core.tree.sizes[0][3] == len("user: tiny")
    assert core.ready() == [(0, 0), (0, 1), (0, 2)]
    assert_valid(core)
