"""SPEC §9 laws 1–5 and 8–10 over random histories, against an independent model of the core.

A `RuleBasedStateMachine` appends messages of mixed sizes, builds ready or merely buildable
nodes, fails compactions (the third failure cuts), cuts a node at once, resumes a waiting batch
without a message, tries invalid events, and restarts the core from its arrays (with the saved
views, without them, and from older saves), at small budgets so that trees get deep and batches
frequent. After every step the core must agree with
`memory_reference.RefCore`, written from the spec alone, and the laws are checked directly.
"""

from __future__ import annotations

from array import array
from typing import Any

import pytest
from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from memory_reference import (
    CUT,
    LINE_LIMIT,
    RefCore,
    coarsens,
    cut_prefix,
    first_of,
    last_of,
    merge_at,
    most_due,
    nbytes,
    sibling_pairs,
    tiles,
)

from budget import examples
from evertalk.memory import Budget, MemoryCore
from evertalk.memory.core import CoreError, SavedViews
from evertalk.memory.tree import UNBUILT, Built, Tree
from evertalk.memory.view import coarsens as view_coarsens
from evertalk.memory.view import tiles as view_tiles

Node = tuple[int, int]
KINDS = ["user", "ever", "tool", "echo", "work", "note"]
UNITS = ["a", "é", "€", "😀", "ab\n", "x y"]


@st.composite
def message_texts(draw: st.DrawFn) -> str:
    shape = draw(st.sampled_from(["tiny", "tiny", "edge", "mid", "multi"]))
    if shape == "tiny":
        return draw(st.text(alphabet="ab \n", max_size=24))
    if shape == "edge":  # around the 512-byte free-leaf boundary (every "kind: " adds 6)
        return "a" * draw(st.integers(495, 512))
    if shape == "mid":
        size = draw(st.integers(400, 2_000))
        unit = draw(st.sampled_from(UNITS))
        return unit * max(1, size // nbytes(unit))
    return draw(
        st.text(alphabet=st.sampled_from(["é", "€", "😀", "x", "\n"]), min_size=60, max_size=300)
    )


@st.composite
def line_texts(draw: st.DrawFn) -> str:
    """A compactor's line: 1–512 bytes, sometimes of multi-byte characters."""
    size = draw(st.integers(1, LINE_LIMIT))
    unit = draw(st.sampled_from(UNITS))
    text = unit * (size // nbytes(unit))
    return text or "x" * size


def triples(built: list[Built]) -> list[tuple[Node, str, int]]:
    return [(b.node, b.text, b.flag) for b in built]


def full_state(core: MemoryCore) -> tuple[Any, ...]:
    return (
        core.t,
        core.view.nodes(),
        core.view.size,
        core.view.shrinking,
        core.cview.nodes(),
        core.cview.size,
        core.cview.shrinking,
        core.ready(),
        [bytes(row) for row in core.tree.flags],
        [list(row) for row in core.tree.sizes],
    )


def lists_and_flags(core: MemoryCore) -> tuple[Any, ...]:
    return (core.view.nodes(), core.view.shrinking, core.cview.nodes(), core.cview.shrinking)


def check_merges(start: list[Node], new: list[Node], t_count: int, built: Any) -> None:
    """Laws 2 and 3: `new` is `start`, or `start` after successive merges, each of the most
    due pair whose parent is built (the oldest on ties)."""
    lines = start
    while lines != new:
        assert len(lines) > len(new), (start, new)
        p = most_due(lines, t_count, built)
        assert p is not None, (lines, new)
        lines = merge_at(lines, p)


def unbounded_context(ref: RefCore, node: Node) -> list[Node]:
    """SPEC §3.7's run before the bound: the cview's lines that end at or before the node's end
    (a leaf: before its message), up to the first unbuilt line."""
    end = first_of(node) - 1 if node[0] == 0 else last_of(node)
    run: list[Node] = []
    for line in ref.cview:
        if last_of(line) > end or not ref.built(line):
            break
        run.append(line)
    return run


class CoreLaws(RuleBasedStateMachine):
    BUDGET = Budget(ceiling=2_000, floor=1_000, cceiling=800, cfloor=400, window=8)

    def __init__(self) -> None:
        super().__init__()
        b = self.BUDGET
        self.core = MemoryCore(b)
        self.ref = RefCore(b.ceiling, b.floor, b.cceiling, b.cfloor, b.window)
        self.saves: list[SavedViews] = []

    # -- events -----------------------------------------------------------------------------

    @rule(kind=st.sampled_from(KINDS), text=message_texts())
    def append(self, kind: str, text: str) -> None:
        self.append_one(kind, text)

    @rule(messages=st.lists(st.tuples(st.sampled_from(KINDS), message_texts()), max_size=8))
    def append_several(self, messages: list[tuple[str, str]]) -> None:
        for kind, text in messages:
            self.append_one(kind, text)
            self.check_all()

    def append_one(self, kind: str, text: str) -> None:
        core, ref = self.core, self.ref
        self.saves.append(core.saved())
        old_view, old_cview = core.view.nodes(), core.cview.nodes()
        built = core.append(kind, text)
        assert triples(built) == ref.append(kind, text)
        t = core.t - 1
        view, cview = core.view.nodes(), core.cview.nodes()
        assert core.merged == ref.merged == (view != [*old_view, (0, t)])
        check_merges([*old_view, (0, t)], view, t + 1, ref.built)
        check_merges(view if core.merged else [*old_cview, (0, t)], cview, t + 1, ref.built)
        self.check_law_4()
        event(
            f"append: merged={core.merged} shrinking={core.view.shrinking}/{core.cview.shrinking}"
        )

    def teardown(self) -> None:
        t = self.core.t
        event(f"final T: {'0-9' if t < 10 else '10-39' if t < 40 else '40+'}")
        event(f"tree depth {t.bit_length()}")

    def check_law_4(self) -> None:
        """Right after a message: a set flag means no mergeable pair is left; otherwise the
        size is at most the ceiling, and at most the floor if the view merged or was fitted."""
        b, core = self.BUDGET, self.core
        for view, ceiling, floor, worked in (
            (core.view, b.ceiling, b.floor, core.merged),
            (core.cview, b.cceiling, b.cfloor, self.ref.fitted),
        ):
            nodes = view.nodes()
            if view.shrinking:
                for p in sibling_pairs(nodes):
                    level, index = nodes[p]
                    assert not self.ref.built((level + 1, index // 2))
                assert view.size > floor
            else:
                assert view.size <= ceiling
                if worked:
                    assert view.size <= floor

    @precondition(lambda self: bool(self.core.ready()))
    @rule(data=st.data())
    def build_ready(self, data: st.DataObject) -> None:
        node = data.draw(st.sampled_from(self.core.ready()), label="node")
        self.build_node(node, data.draw(line_texts(), label="text"))

    @precondition(lambda self: bool(self.ref.pending()))
    @rule(data=st.data())
    def build_any(self, data: st.DataObject) -> None:
        """Any node whose sources are built, also a leaf beyond the window (Appendix A)."""
        node = data.draw(st.sampled_from(self.ref.pending()), label="node")
        self.build_node(node, data.draw(line_texts(), label="text"))

    @precondition(lambda self: bool(self.core.ready()))
    @rule(data=st.data(), count=st.integers(1, 12))
    def build_several_ready(self, data: st.DataObject, count: int) -> None:
        for _ in range(count):
            ready = self.core.ready()
            if not ready:
                break
            node = data.draw(st.sampled_from(ready), label="node")
            self.build_node(node, data.draw(line_texts(), label="text"))
            self.check_all()

    def build_node(self, node: Node, text: str) -> None:
        before = lists_and_flags(self.core)
        assert self.core.pending_error(node) is None
        assert triples(self.core.build(node, text)) == self.ref.build(node, text)
        assert lists_and_flags(self.core) == before  # law 2: builds change no list or flag

    @precondition(lambda self: bool(self.ref.pending()))
    @rule(data=st.data(), times=st.integers(1, 3))
    def fail(self, data: st.DataObject, times: int) -> None:
        node = data.draw(st.sampled_from(self.ref.pending()), label="node")
        for _ in range(times):
            before = lists_and_flags(self.core)
            third = self.ref.failures.get(node, 0) == 2
            node_input = self.ref.input_of(node)
            built = self.core.fail(node)
            assert triples(built) == self.ref.fail(node)
            if third:  # law 10: the third failure builds the cut node
                assert built[0] == Built(node[0], node[1], cut_prefix(node_input), CUT)
                assert nbytes(built[0].text) <= LINE_LIMIT
                assert node_input.startswith(built[0].text)
                assert self.core.tree.flags[node[0]][node[1]] == CUT
                assert node not in self.core.ready()
            else:
                assert built == []
            assert lists_and_flags(self.core) == before  # law 2
            if third:
                break

    @rule(data=st.data(), op=st.sampled_from(["build", "fail"]))
    def invalid(self, data: st.DataObject, op: str) -> None:
        ref = self.ref
        choices = [st.tuples(st.integers(0, 7), st.integers(0, ref.t + 3))]
        if ref.texts:
            choices.append(st.sampled_from(sorted(ref.texts)))  # built, free or cut
        node = data.draw(st.one_of(choices), label="node")
        if ref.valid_target(node):
            assert self.core.pending_error(node) is None
            return
        assert self.core.pending_error(node)
        before = full_state(self.core)
        with pytest.raises(CoreError):
            if op == "build":
                self.core.build(node, "line")
            else:
                self.core.fail(node)
        assert full_state(self.core) == before
        assert self.core.failures.get(node) is None

    @precondition(lambda self: bool(self.ref.pending()))
    @rule(data=st.data())
    def cut(self, data: st.DataObject) -> None:
        """A node whose input does not fit the compactor model's window is cut at once."""
        node = data.draw(st.sampled_from(self.ref.pending()), label="node")
        before = lists_and_flags(self.core)
        assert triples(self.core.cut(node)) == self.ref.cut(node)
        assert lists_and_flags(self.core) == before  # law 2: a build changes no list or flag

    @rule()
    def resume_batch(self) -> None:
        """The batch goes on without a message (`memory compact` once everything is built):
        its changes are merges of the most due pairs (law 3), and it ends as a batch does at a
        message (law 4)."""
        core, ref, b = self.core, self.ref, self.BUDGET
        before = lists_and_flags(core)
        old_view, old_cview = core.view.nodes(), core.cview.nodes()
        changed = core.resume_batch()
        ref.resume_batch()
        assert changed == (lists_and_flags(core) != before)
        view, cview = core.view.nodes(), core.cview.nodes()
        check_merges(old_view, view, core.t, ref.built)
        check_merges(view if view != old_view else old_cview, cview, core.t, ref.built)
        for current, floor in ((core.view, b.floor), (core.cview, b.cfloor)):
            nodes = current.nodes()
            if current.shrinking:
                for p in sibling_pairs(nodes):
                    assert not ref.built((nodes[p][0] + 1, nodes[p][1] // 2))
                assert current.size > floor
        if view != old_view:
            assert core.view.size <= b.floor or core.view.shrinking
        event(f"resume_batch: changed={changed}")

    # -- restarts ---------------------------------------------------------------------------

    def reopen(self, saved: SavedViews | None) -> tuple[MemoryCore, str | None]:
        old, ref = self.core.tree, self.ref
        tree = Tree.from_arrays(
            old.t, [array("I", row) for row in old.sizes], [bytearray(row) for row in old.flags]
        )
        nodes, leaves = tree.wanted()
        assert all(ref.built(node) for node in nodes)
        assert leaves == [i for i in range(ref.t) if not ref.built((0, i))]
        tree.supply({n: ref.texts[n] for n in nodes}, {i: ref.inputs[i] for i in leaves})
        core, built, warning = MemoryCore.resume(tree, saved, self.BUDGET)
        assert built == []  # nothing was lost
        ref.failures.clear()  # failure counts are not saved (SPEC §4.5)
        return core, warning

    @rule()
    def restart(self) -> None:
        """Law 8: closing and reopening gives the identical state."""
        before = full_state(self.core)
        core, warning = self.reopen(self.core.saved())
        assert warning is None
        assert full_state(core) == before
        assert core.saved() == self.core.saved()
        self.core = core

    @rule()
    def restart_without_view_json(self) -> None:
        core, warning = self.reopen(None)
        if self.ref.t:
            assert warning
        self.ref.fold()
        self.core = core

    @precondition(lambda self: bool(self.saves))
    @rule(data=st.data())
    def restart_from_older_save(self, data: st.DataObject) -> None:
        """A crash after messages were logged but before view.json was saved (t < T)."""
        saved = data.draw(st.sampled_from(self.saves), label="saved")
        core, warning = self.reopen(saved)
        assert warning is None
        assert saved.cview is not None
        self.ref.restore(saved.t, saved.view, saved.cview, saved.shrinking, saved.cshrinking)
        self.core = core

    # -- laws after every event -------------------------------------------------------------

    def check_all(self) -> None:
        self.agrees_with_the_reference()
        self.law_1_tiling()
        self.law_5_sizes()
        self.law_9_context()
        self.law_10_ready()

    @invariant()
    def agrees_with_the_reference(self) -> None:
        core, ref = self.core, self.ref
        assert core.t == ref.t
        assert core.view.nodes() == ref.view
        assert core.cview.nodes() == ref.cview
        assert (core.view.shrinking, core.cview.shrinking) == (ref.shrinking, ref.cshrinking)
        assert core.ready() == ref.ready()
        assert len(core.tree.flags) == ref.t.bit_length()
        for level, row in enumerate(core.tree.flags):
            assert len(row) == ref.t >> level
            for index, flag in enumerate(row):
                node = (level, index)
                assert flag == ref.flags.get(node, UNBUILT), node
                if flag != UNBUILT:
                    assert core.tree.sizes[level][index] == nbytes(ref.texts[node])

    @invariant()
    def law_1_tiling(self) -> None:
        core, t = self.core, self.core.t
        view, cview = core.view.nodes(), core.cview.nodes()
        for lines in (view, cview):
            assert tiles(lines, t)
            assert view_tiles(lines, t)
            for level, index in lines:
                if level > 0:
                    assert core.tree.flags[level][index] != UNBUILT
        assert coarsens(cview, view)
        assert view_coarsens(cview, view)

    @invariant()
    def law_5_sizes(self) -> None:
        core = self.core
        for view, lines in ((core.view, self.ref.view), (core.cview, self.ref.cview)):
            recomputed = 0
            for level, index in view.nodes():
                flag = core.tree.flags[level][index]
                recomputed += 29 if flag == UNBUILT else core.tree.sizes[level][index]
            assert view.size == recomputed == self.ref.size(lines)

    @invariant()
    def law_9_context(self) -> None:
        core, cview, ceiling = self.core, self.core.cview.nodes(), self.BUDGET.cceiling
        for node in self.ref.pending():
            context = core.context(node)
            for line in context:
                assert self.ref.built(line)  # only built lines
                if node[0] == 0:
                    assert last_of(line) < first_of(node)  # a leaf: lines before its message
                else:
                    assert last_of(line) <= last_of(node)  # a merge: at or before its end
            # a contiguous run of the cview, ending where the run of SPEC §3.7 ends, that
            # stops only at an unbuilt line or at the node's end; of it, the newest lines that
            # fit the cview's ceiling, as many as fit
            run = unbounded_context(self.ref, node)
            assert run == cview[: len(run)]
            assert context == run[len(run) - len(context) :]
            size = self.ref.size(context)
            assert size <= ceiling
            if len(context) < len(run):
                assert size + self.ref.line_size(run[-len(context) - 1]) > ceiling
            assert context == self.ref.context(node)

    @invariant()
    def law_10_ready(self) -> None:
        core, ref = self.core, self.ref
        ready = core.ready()
        assert ready == sorted(set(ready))
        unbuilt_leaves = [i for i in range(ref.t) if not ref.built((0, i))]
        for level, index in ready:
            assert not ref.built((level, index))
            if level == 0:
                before = [i for i in unbuilt_leaves if i < index]
                assert len(before) < self.BUDGET.window
            else:
                assert ref.built((level - 1, 2 * index)) and ref.built((level - 1, 2 * index + 1))


class TinyLaws(CoreLaws):
    """Batches that run out of built parents, and a window of 2."""

    BUDGET = Budget(ceiling=300, floor=120, cceiling=100, cfloor=50, window=2)


class CloseLaws(CoreLaws):
    """A compaction view only a little coarser than the view, so that the two differ often."""

    BUDGET = Budget(ceiling=700, floor=350, cceiling=600, cfloor=300, window=4)


class WideCviewLaws(CoreLaws):
    """A compaction view allowed to be bigger than the view: it is then mostly the copy the
    view hands it at each batch (SPEC §3.5), so that copy is what gets tested."""

    BUDGET = Budget(ceiling=500, floor=250, cceiling=900, cfloor=300, window=3)


class ZeroFloorLaws(CoreLaws):
    """Floors of zero: every batch merges until no built parent is left; a window of 1."""

    BUDGET = Budget(ceiling=100, floor=0, cceiling=40, cfloor=0, window=1)


_SETTINGS = settings(
    max_examples=examples(120),
    stateful_step_count=60,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
TestCoreLaws = CoreLaws.TestCase
TestCoreLaws.settings = _SETTINGS
TestTinyLaws = TinyLaws.TestCase
TestTinyLaws.settings = _SETTINGS
TestCloseLaws = CloseLaws.TestCase
TestCloseLaws.settings = _SETTINGS
TestWideCviewLaws = WideCviewLaws.TestCase
TestWideCviewLaws.settings = settings(_SETTINGS, max_examples=examples(60))
TestZeroFloorLaws = ZeroFloorLaws.TestCase
TestZeroFloorLaws.settings = settings(_SETTINGS, max_examples=examples(60))


# -- scripted cases ---------------------------------------------------------------------------


def test_cview_is_a_fitted_copy_of_the_view_after_a_merge() -> None:
    """SPEC §3.5: when the chat view merges, the cview becomes a copy of it, then is fitted."""
    core = MemoryCore(Budget(ceiling=100, floor=50, cceiling=1_000, cfloor=500, window=8))
    for _ in range(2):
        core.append("user", "m" * 34)  # 40-byte free leaves, and a free parent
        assert not core.merged
    assert core.cview.nodes() == [(0, 0), (0, 1)]
    core.append("user", "m" * 34)  # 120 > 100: a batch; (0, 0) and (0, 1) merge
    assert core.merged and core.view.shrinking  # 121 > 50, and nothing left to merge
    assert core.view.nodes() == [(1, 0), (0, 2)]
    assert core.cview.nodes() == [(1, 0), (0, 2)]  # not the old cview plus (0, 2)
    assert not core.cview.shrinking  # 121 ≤ 500


def test_real_budget_sawtooth() -> None:
    """Laws 1, 4 and 5 at the real budgets, with a compactor that keeps up: the view climbs to
    just over 128,000 bytes and each batch brings it back to at most 64,000, in one go."""
    import random

    rnd = random.Random(7)
    budget = Budget()
    core = MemoryCore(budget)
    batches, sizes_after_warmup = 0, []
    for t in range(3_000):
        core.append("user", "w" * rnd.randint(600, 3_000))
        view = core.view
        if core.merged:
            batches += 1
            assert view.size <= budget.floor and not view.shrinking
            assert core.cview.size <= budget.cfloor
        assert view.size <= budget.ceiling or view.shrinking
        assert core.cview.size <= budget.cceiling or core.cview.shrinking
        for _ in range(3):
            for node in core.ready():
                core.build(node, "s" * rnd.randint(150, 512))
        if batches:
            sizes_after_warmup.append(view.size)
        assert tiles(view.nodes(), t + 1) and coarsens(core.cview.nodes(), view.nodes())
    sizes = core.tree.sizes
    for current in (core.view, core.cview):
        assert current.size == sum(sizes[level][index] for level, index in current.nodes())
    assert batches >= 3
    # a batch stops at its first merge that reaches the floor; one merge saves < 1,024 bytes
    assert budget.floor - 1_024 < min(sizes_after_warmup)
    assert max(sizes_after_warmup) <= budget.ceiling + 512


def test_merge_context_ends_at_its_node() -> None:
    """SPEC §3.7: a merge's context holds the cview lines that end at or before its last
    message b, so (1, 0) over messages 0–1 sees its own leaves 0+1 and 1+1."""
    core = MemoryCore()
    core.append("user", "u" * 600)
    core.append("ever", "e" * 600)
    core.build((0, 0), "user asked " + "a" * 289)  # 300 + 1 + 300 bytes: (1, 0) is not free
    core.build((0, 1), "ever answered " + "b" * 286)
    assert core.ready() == [(1, 0)]
    assert core.cview.nodes() == [(0, 0), (0, 1)]
    assert core.context((1, 0)) == [(0, 0), (0, 1)]


def test_context_equals_the_spec_over_a_history() -> None:
    ref = RefCore(2_000, 1_000, 800, 400, 8)
    core = MemoryCore(Budget(2_000, 1_000, 800, 400, 8))
    mismatches = []
    for t in range(40):
        text = "c" * (600 + 37 * t % 500)
        core.append("user", text)
        ref.append("user", text)
        for node in ref.pending():
            if core.context(node) != ref.context(node):
                mismatches.append(node)
        for node in core.ready()[:2]:
            line = "s" * (100 + 11 * t % 300)
            core.build(node, line)
            ref.build(node, line)
    assert mismatches == []


def test_leaf_context_stops_before_its_message_and_at_the_first_unbuilt_line() -> None:
    core = MemoryCore()
    core.append("user", "hi")  # free
    core.append("ever", "e" * 600)  # unbuilt
    core.append("user", "ok")  # free
    core.append("tool", "t" * 600)  # unbuilt
    assert core.cview.nodes() == [(0, 0), (0, 1), (0, 2), (0, 3)]
    assert core.context((0, 1)) == [(0, 0)]
    assert core.context((0, 3)) == [(0, 0)]  # stops before the unbuilt 1+1
    core.build((0, 1), "ever replied")
    assert core.context((0, 3)) == [(0, 0), (0, 1), (0, 2)]


def test_leaf_context_ends_before_its_message_even_once_built() -> None:
    """SPEC §3.7 defines a leaf's context as the lines that end before its message; the core
    only gets this right while the leaf is unbuilt (its own line then stops the walk)."""
    core = MemoryCore()
    core.append("user", "hi")
    core.append("ever", "e" * 600)
    core.build((0, 1), "ever replied")
    assert core.context((0, 1)) == [(0, 0)]


def _sized_history(budget: Budget) -> MemoryCore:
    """Leaves of 300 bytes, parents of 100, then a free 6-byte leaf: 1,206 bytes at its append."""
    core = MemoryCore(budget)
    for t in range(2):
        core.append("user", "m" * 600)
        core.build((0, t), "l" * 300)
    core.build((1, 0), "p" * 100)
    core.append("user", "m" * 600)
    core.append("user", "m" * 600)
    for t in range(2, 4):
        core.build((0, t), "l" * 300)
    core.build((1, 1), "p" * 100)
    assert not core.merged and core.view.size == 1_200
    core.append("user", "")  # "user: " is 6 bytes, free
    return core


LEAVES = [(0, 0), (0, 1), (0, 2), (0, 3), (0, 4)]


@pytest.mark.parametrize(
    ("ceiling", "floor", "lines", "size"),
    [
        (1_206, 706, LEAVES, 1_206),  # exactly at the ceiling: no batch
        (1_205, 706, [(1, 0), (0, 2), (0, 3), (0, 4)], 706),  # one merge reaches the floor
        (1_205, 705, [(1, 0), (1, 1), (0, 4)], 206),  # one more is needed
    ],
)
def test_batch_bounds_are_strict(ceiling: int, floor: int, lines: list[Node], size: int) -> None:
    """SPEC §3.4: a batch starts only strictly above the ceiling and merges only while the size
    is strictly above the floor (0–1 is due 4 at T = 5, 2–3 due 2); §3.5 likewise."""
    core = _sized_history(Budget(ceiling, floor, 100_000, 100_000, 8))
    assert core.view.nodes() == lines and core.view.size == size
    assert core.merged == (lines != LEAVES)
    assert not core.view.shrinking
    assert core.cview.nodes() == lines  # a copy of the view, fitted (to nothing more)
    core = _sized_history(Budget(100_000, 100_000, ceiling, floor, 8))
    assert not core.merged and core.view.nodes() == LEAVES
    assert core.cview.nodes() == lines and core.cview.size == size
    assert not core.cview.shrinking
