"""A chat that is behind (an import, a long time offline, a lost tree): every message logged, only
the free nodes built. The compaction context stays bounded (SPEC §3.7), a waiting batch can go
on without a message (`resume_batch`), a node too long to send is cut (`cut`), and `catch_up`
says how far behind the memory is."""

from __future__ import annotations

import random
from array import array

import pytest
from memory_reference import RefCore

from evertalk.memory import Budget, MemoryCore, Node
from evertalk.memory.core import BEHIND_SUMMARIES, CoreError
from evertalk.memory.text import cut_utf8
from evertalk.memory.tree import CUT, Tree

SMALL = Budget(ceiling=8_000, floor=4_000, cceiling=3_000, cfloor=2_000)


def no_tree_chat(count: int, budget: Budget = SMALL, seed: int = 1) -> MemoryCore:
    """Messages of mixed sizes, none summarized: about a third are free leaves."""
    rng = random.Random(seed)
    core = MemoryCore(budget)
    for k in range(count):
        size = rng.choice((20, 120, 300, 700, 1_500, 4_000))
        core.append(rng.choice(("user", "ever", "echo")), f"m{k} " + "w" * size)
    return core


def line(node: Node) -> str:
    """A model's line for a node: 200–450 bytes, the same for the same node."""
    return "s" * (200 + (node[0] * 97 + node[1] * 31) % 250)


def build_all(core: MemoryCore) -> None:
    """The compactor's order while a batch waits: its parents first, then leaves, then merges."""
    while ready := core.batch_parents() or core.ready():
        core.build(ready[0], line(ready[0]))


def run_before(core: MemoryCore, node: Node) -> list[Node]:
    """SPEC §3.7 without the bound: the cview's lines that end at or before the node's end (a
    leaf: before its message), oldest first, up to the first unbuilt line."""
    level, index = node
    end = ((index + 1) << level) if level else index
    lines: list[Node] = []
    for line_level, line_index in core.cview:
        if (line_index + 1) << line_level > end or not core.tree.is_built((line_level, line_index)):
            break
        lines.append((line_level, line_index))
    return lines


# -- the compaction context is bounded --------------------------------------------------------


def test_a_context_holds_its_newest_lines_up_to_the_cview_ceiling() -> None:
    core = no_tree_chat(400)
    assert core.view.shrinking and core.cview.size > 10 * SMALL.cceiling  # nothing merges
    checked = 0
    for index in range(400):  # the leaves in order, as the window lets the compactor go
        node = (0, index)
        if core.tree.is_built(node):
            continue
        run = run_before(core, node)
        context = core.context(node)
        size = sum(core.tree.size(n) for n in context)
        assert size <= SMALL.cceiling
        assert context == run[len(run) - len(context) :]  # the newest lines, ending where it did
        if len(context) < len(run):  # the longest run that fits: one line more would not
            assert size + core.tree.size(run[-len(context) - 1]) > SMALL.cceiling
            checked += 1
        core.build(node, line(node))
    assert checked > 100


def test_a_merge_context_is_bounded_too() -> None:
    core = no_tree_chat(64)
    for index in range(64):
        if not core.tree.is_built((0, index)):
            core.build((0, index), line((0, index)))
    merge = next(node for node in core.ready() if node[0] == 1 and node[1] > 20)
    context = core.context(merge)
    level, index = context[-1]
    assert (index + 1) << level <= (merge[1] + 1) << 1  # it ends at the merge's end or before
    assert sum(core.tree.size(n) for n in context) <= SMALL.cceiling
    run = run_before(core, merge)
    assert context == run[len(run) - len(context) :] and len(context) < len(run)


def test_a_context_that_fits_is_the_whole_run() -> None:
    core = no_tree_chat(400, Budget(ceiling=8_000, floor=4_000, cceiling=10**9, cfloor=2_000))
    for index in range(200):
        if not core.tree.is_built((0, index)):
            core.build((0, index), line((0, index)))
    for node in core.ready():
        assert core.context(node) == run_before(core, node)


class CountingTree(Tree):
    lookups = 0

    def built_at(self, level: int, index: int) -> bool:
        CountingTree.lookups += 1
        return super().built_at(level, index)

    def is_built(self, node: Node) -> bool:
        CountingTree.lookups += 1
        return super().is_built(node)


def test_a_context_is_found_walking_back_from_its_end() -> None:
    """Thousands of built lines before the node: the context costs its own lines, not theirs."""
    core = MemoryCore(Budget(ceiling=2_000, floor=1_000, cceiling=1_000, cfloor=500))
    core.tree = CountingTree()
    for k in range(1_500):
        core.append("user", f"m{k} " + "w" * 700)
    for index in range(1_000):
        core.build((0, index), "s" * 300)
    assert len(core.cview) == 1_500  # no parent built: nothing merged
    CountingTree.lookups = 0
    context = core.context((0, 1_000))
    assert context == [(0, index) for index in range(997, 1_000)]  # 3 × 300 ≤ 1,000
    assert CountingTree.lookups < 20


# -- the batch goes on without a message ------------------------------------------------------


def test_resume_batch_brings_the_view_to_its_floor_once_everything_is_built() -> None:
    core = no_tree_chat(300)
    build_all(core)
    assert core.view.shrinking and core.view.size > SMALL.ceiling  # builds change no view
    before = core.view.nodes()
    assert core.resume_batch()
    assert not core.view.shrinking and core.view.size <= SMALL.floor
    assert not core.cview.shrinking and core.cview.size <= SMALL.cfloor
    assert len(core.view) < len(before)
    assert not core.resume_batch()  # nothing left to do


def test_resume_batch_agrees_with_the_reference() -> None:
    rng = random.Random(5)
    budget = Budget(ceiling=2_000, floor=1_000, cceiling=800, cfloor=400)
    core = MemoryCore(budget)
    ref = RefCore(budget.ceiling, budget.floor, budget.cceiling, budget.cfloor, budget.window)
    resumed = 0
    for _ in range(600):
        roll = rng.random()
        if roll < 0.5:
            text = "a" * rng.choice((10, 300, 600, 1_200))
            core.append("user", text)
            ref.append("user", text)
        elif roll < 0.9 and core.ready():
            node = rng.choice(core.ready())
            text = "b" * rng.randrange(150, 513)
            core.build(node, text)
            ref.build(node, text)
        else:
            resumed += core.resume_batch()
            ref.resume_batch()
        assert (core.view.nodes(), core.view.shrinking) == (ref.view, ref.shrinking)
        assert (core.cview.nodes(), core.cview.shrinking) == (ref.cview, ref.cshrinking)
    assert resumed > 5


def copy_tree(tree: Tree) -> Tree:
    """The tree as a reopen loads it: arrays, then the texts the core needs."""
    copied = Tree.from_arrays(
        tree.t, [array("I", row) for row in tree.sizes], [bytearray(row) for row in tree.flags]
    )
    nodes, leaves = copied.wanted()
    copied.supply({n: tree.texts[n] for n in nodes}, {i: tree.inputs[i] for i in leaves})
    return copied


def test_the_views_after_resume_batch_reopen_identically() -> None:
    core = no_tree_chat(300)
    build_all(core)
    core.resume_batch()
    reopened, built, warning = MemoryCore.resume(copy_tree(core.tree), core.saved(), SMALL)
    assert built == [] and warning is None
    assert reopened.saved() == core.saved()
    assert (reopened.view.size, reopened.cview.size) == (core.view.size, core.cview.size)


# -- a node too long to send ------------------------------------------------------------------


def test_cut_builds_a_node_from_its_cut_input_at_once() -> None:
    core = MemoryCore()
    core.append("user", "é" * 20_000)
    core.append("user", "hi")
    views = (core.view.nodes(), core.cview.nodes())
    built = core.cut((0, 0))
    assert [(b.node, b.text, b.flag) for b in built] == [
        ((0, 0), cut_utf8("user: " + "é" * 20_000), CUT)
    ]
    assert core.tree.is_built((0, 0)) and (0, 0) not in core.ready()
    assert (core.view.nodes(), core.cview.nodes()) == views  # like a build: no view changes
    with pytest.raises(CoreError):
        core.cut((0, 0))


# -- how far behind -----------------------------------------------------------------------------


def test_a_chat_with_no_tree_is_behind_until_it_has_caught_up() -> None:
    core = no_tree_chat(300)
    catch_up = core.catch_up()
    assert catch_up.behind and catch_up.to_go == core.tree.unbuilt_count() > BEHIND_SUMMARIES
    assert catch_up.view_after_batch == core.view.size > SMALL.ceiling
    build_all(core)
    catch_up = core.catch_up()
    assert catch_up.to_go == 0 and not catch_up.behind
    assert catch_up.view_after_batch <= SMALL.floor < core.view.size  # the batch waits
    core.resume_batch()
    assert core.catch_up().view_after_batch == core.view.size


def test_a_chat_whose_compactor_keeps_up_is_not_behind() -> None:
    core = MemoryCore(SMALL)
    for k in range(500):
        core.append("user", f"m{k} " + "w" * 700)
        build_all(core)
        assert not core.catch_up().behind
    core.append("user", "w" * 700)
    assert core.catch_up().to_go == 1 and not core.catch_up().behind


def test_many_summaries_to_go_are_behind_even_under_the_ceiling() -> None:
    core = MemoryCore(Budget())  # 64 long messages: 1,856 bytes of placeholders
    for k in range(64):
        core.append("user", f"m{k} " + "w" * 700)
    catch_up = core.catch_up()
    assert catch_up.view_after_batch < Budget().ceiling
    assert catch_up.to_go == 64 + 63 and catch_up.behind
