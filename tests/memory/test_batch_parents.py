"""The parents an unfinished batch waits for (SPEC §3.4, §4.1): while a view is shrinking and
the compactor lags, its most due pairs' parents are the merges to build first."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from memory_reference import RefCore, due, sibling_pairs

from budget import examples
from evertalk.memory import Budget, MemoryCore, Node
from evertalk.memory.tree import Tree

LONG = "x" * 600  # `user: ` + 600 bytes: never a free leaf
LINE = "y" * 300  # two of them make no free parent (300 + 1 + 300 > 512)
ROOMY = 1_000_000  # a budget the other view never reaches


def lagging(budget: Budget) -> MemoryCore:
    """Eight long messages whose leaves got built only after the fact, then a ninth: at that
    message the view (or cview) passed its ceiling with no parent built, so its batch waits."""
    core = MemoryCore(budget)
    for _ in range(8):
        core.append("user", LONG)
    for index in range(8):
        core.build((0, index), LINE)
    core.append("user", LONG)
    return core


def test_the_most_due_pairs_parent_comes_first() -> None:
    core = lagging(Budget(ceiling=2_000, floor=1_000, cceiling=ROOMY, cfloor=ROOMY))
    assert core.view.shrinking and not core.cview.shrinking
    # T = 9: the pair 0–1 ended 8 messages ago, 2–3 six, 4–5 four, 6–7 two
    assert core.batch_parents() == [(1, 0), (1, 1), (1, 2), (1, 3)]
    assert core.ready() == [(0, 8), (1, 0), (1, 1), (1, 2), (1, 3)]  # the replay's: by (l, i)


def test_a_built_parent_merges_in_the_next_batch_and_may_open_the_pair_above() -> None:
    core = lagging(Budget(ceiling=2_000, floor=1_000, cceiling=ROOMY, cfloor=ROOMY))
    core.build((1, 0), LINE)
    assert core.batch_parents() == [(1, 1), (1, 2), (1, 3)]
    core.build((1, 1), LINE)
    # the next batch merges 0–1 and 2–3, which makes 0+2, 2+2 a pair: due (9 − 3)/2 = 3,
    # between the pairs 4–5 (due 4) and 6–7 (due 2)
    assert core.batch_parents() == [(1, 2), (2, 0), (1, 3)]
    assert core.view.nodes() == [(0, i) for i in range(9)]  # builds never change a view


def test_only_while_a_batch_waits() -> None:
    core = lagging(Budget(ceiling=ROOMY, floor=ROOMY, cceiling=ROOMY, cfloor=ROOMY))
    assert not core.view.shrinking and core.ready()[1:] == [(1, 0), (1, 1), (1, 2), (1, 3)]
    assert core.batch_parents() == []


def test_none_once_the_built_parents_reach_the_floor() -> None:
    core = lagging(Budget(ceiling=2_300, floor=2_200, cceiling=ROOMY, cfloor=ROOMY))
    assert core.batch_parents() == [(1, 0), (1, 1), (1, 2), (1, 3)]  # 2,429 bytes
    core.build((1, 0), LINE)  # with it the next batch gets to 2,129 bytes: done
    assert core.batch_parents() == []


def test_the_cview_waits_too_after_the_view() -> None:
    core = lagging(Budget(ceiling=ROOMY, floor=ROOMY, cceiling=2_000, cfloor=1_000))
    assert not core.view.shrinking and core.cview.shrinking
    assert core.batch_parents() == [(1, 0), (1, 1), (1, 2), (1, 3)]
    both = lagging(Budget(ceiling=2_000, floor=1_000, cceiling=2_000, cfloor=1_000))
    assert both.batch_parents() == [(1, 0), (1, 1), (1, 2), (1, 3)]  # each parent once


class CountingTree(Tree):
    lookups = 0

    def built_at(self, level: int, index: int) -> bool:
        CountingTree.lookups += 1
        return super().built_at(level, index)


def test_it_walks_the_view_not_the_tree() -> None:
    core = MemoryCore(Budget(ceiling=4_000, floor=2_000, cceiling=1_000, cfloor=500))
    core.tree = CountingTree()
    for k in range(20_000):  # a long chat, every node built as it comes
        core.append("user", LONG)
        core.build((0, k), LINE)
        while (merge := core.queues.first_merge(core.tree)) is not None:
            core.build(merge, LINE)
    for _ in range(40):  # then the compactor stops: the view passes its ceiling, unmerged
        core.append("user", LONG)
    for k in range(20_000, 20_040):
        core.build((0, k), LINE)
    core.append("user", LONG)
    assert core.view.shrinking
    CountingTree.lookups = 0
    assert core.batch_parents()[0] == (1, 10_000)  # the oldest new pair: the most due
    assert CountingTree.lookups < 20 * (len(core.view) + len(core.cview))


# -- against the reference model --------------------------------------------------------------


def reference(ref: RefCore) -> list[Node]:
    """SPEC's words, plainly: fit a copy of each waiting view as its next batch would, with
    the nodes built now; if it stays over its floor, the parents of its pairs whose halves
    are built, most due first (the oldest on ties); the view's, then the cview's."""
    found: list[Node] = []
    for lines, waiting, floor in (
        (ref.view, ref.shrinking, ref.floor),
        (ref.cview, ref.cshrinking, ref.cfloor),
    ):
        if not waiting:
            continue
        fitted, _ = ref.fit(list(lines), ref.t, floor)
        if ref.size(fitted) <= floor:
            continue
        ranked: list[tuple[Fraction, int, Node]] = []
        for p in sibling_pairs(fitted):
            level, index = fitted[p]
            parent = (level + 1, index // 2)
            if not ref.built(parent) and ref.sources_built(parent):
                ranked.append((-due(ref.t, level, index), p, parent))
        found += [parent for *_, parent in sorted(ranked) if parent not in found]
    return found


def step(core: MemoryCore, ref: RefCore, rng: Any, lagging: bool) -> None:
    """A message, or a build: while the compactor lags, of leaves only, and rarely."""
    ready = [node for node in core.ready() if not lagging or node[0] == 0]
    if ready and rng.random() < (0.4 if lagging else 0.7):
        node, text = rng.choice(ready), "b" * rng.randrange(150, 513)
        core.build(node, text)
        ref.build(node, text)
    else:
        text = "a" * rng.choice((10, 300, 600, 1_200))
        core.append("user", text)
        ref.append("user", text)


@settings(max_examples=examples(40), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rng=st.randoms(use_true_random=False))
def test_agrees_with_the_reference(rng: Any) -> None:
    budget = Budget(ceiling=2_000, floor=1_000, cceiling=1_000, cfloor=500)
    core = MemoryCore(budget)
    ref = RefCore(budget.ceiling, budget.floor, budget.cceiling, budget.cfloor, budget.window)
    for phase in range(6):  # lagging and catching up, in turn
        for _ in range(rng.randrange(10, 60)):
            step(core, ref, rng, lagging=phase % 2 == 0)
            waiting = core.batch_parents()
            assert waiting == reference(ref)
            if waiting:
                event("the view waits" if core.view.shrinking else "the cview waits")
