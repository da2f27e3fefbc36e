"""SPEC §9 laws 1–5 and 8–10 over random histories, against an independent model of the core.

A `RuleBasedStateMachine` appends messages of mixed sizes, builds ready or merely buildable
nodes, fails compactions (the third failure cuts), tries invalid events, and restarts the core
from its arrays (with the saved views, without them, and from older saves), at small budgets so
that trees get deep and batches frequent. After every step the core must agree with
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
    if shape == "edge":  # around the 512-byte free-leaf boundary ("user: " etc. add 6–7)
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
        core, cview = self.core, self.core.cview.nodes()
        for node in self.ref.pending():
            context = core.context(node)
            assert context == cview[: len(context)]  # a prefix of the cview
            for line in context:
                assert self.ref.built(line)  # only built lines
                if node[0] == 0:
                    assert last_of(line) < first_of(node)  # a leaf: lines before its message
                else:
                    assert last_of(line) <= last_of(node)  # a merge: at or before its end
            # it stops only at an unbuilt line or at the node's end
            spec = self.ref.context(node)
            assert context == spec[: len(context)]

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


class ZeroFloorLaws(CoreLaws):
    """Floors of zero: every batch merges until no built parent is left; a window of 1."""

    BUDGET = Budget(ceiling=100, floor=0, cceiling=40, cfloor=0, window=1)


_SETTINGS = settings(
    max_examples=40,
    stateful_step_count=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)
TestCoreLaws = CoreLaws.TestCase
TestCoreLaws.settings = _SETTINGS
TestTinyLaws = TinyLaws.TestCase
TestTinyLaws.settings = _SETTINGS
TestZeroFloorLaws = ZeroFloorLaws.TestCase
TestZeroFloorLaws.settings = settings(_SETTINGS, max_examples=25)
