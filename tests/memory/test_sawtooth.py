"""The sawtooth recomputed from the tree equals what the core's views were after each message,
when every node the tree holds was built as soon as it could be."""

from __future__ import annotations

import random

from hypothesis import given
from hypothesis import strategies as st

from evertalk.memory import Budget, MemoryCore
from evertalk.memory.nodes import exists
from evertalk.memory.sawtooth import sawtooth


def replay(
    count: int, budget: Budget, seed: int, never: set[int], cut: set[int]
) -> tuple[MemoryCore, list[tuple[int, int]]]:
    """Feed a core `count` messages, building every node the moment it may be built, except the
    leaves in `never` (and so their parents); leaves in `cut` fail three times instead. Returns
    the core and each view's size after each message."""
    rng = random.Random(seed)
    core = MemoryCore(budget)
    sizes: list[tuple[int, int]] = []
    for t in range(count):
        core.append("user", "m" * rng.choice((3, 40, 200, 490, 700, 1500)))
        for level in range((t + 1).bit_length()):
            node = (level, t >> level)
            if not exists(node, t + 1) or core.tree.is_built(node):
                continue
            if core.pending_error(node) is not None or (level == 0 and t in never):
                break
            if level == 0 and t in cut:
                for _ in range(3):
                    core.fail(node)
            else:
                core.build(node, "s" * rng.randrange(20, 400))
            if (t >> level) & 1 == 0:
                break
        sizes.append((core.view.size, core.cview.size))
    return core, sizes


budgets = st.sampled_from(
    [Budget(3000, 1500, 1200, 600), Budget(1000, 400, 500, 100), Budget(600, 0, 300, 0)]
)


@given(
    count=st.integers(0, 400),
    budget=budgets,
    seed=st.integers(0, 1000),
    never=st.sets(st.integers(0, 400), max_size=12),
    cut=st.sets(st.integers(0, 400), max_size=8),
)
def test_each_message_size_equals_the_cores_view_then(
    count: int, budget: Budget, seed: int, never: set[int], cut: set[int]
) -> None:
    core, sizes = replay(count, budget, seed, never, cut)
    found = sawtooth(core.tree, budget, samples=count)
    assert len(found.stretches) == count
    for t, stretch in enumerate(found.stretches):
        assert (stretch.first, stretch.last) == (t, t)
        expected = sizes[t]
        assert (stretch.view, stretch.cview) == expected, t
        assert stretch.view_low == stretch.view_high == expected[0]
        assert stretch.cview_low == stretch.cview_high == expected[1]


@given(
    count=st.integers(1, 400), budget=budgets, seed=st.integers(0, 1000), samples=st.integers(1, 50)
)
def test_a_stretch_holds_the_least_and_most_of_its_messages(
    count: int, budget: Budget, seed: int, samples: int
) -> None:
    core, sizes = replay(count, budget, seed, set(), set())
    found = sawtooth(core.tree, budget, samples=samples)
    assert len(found.stretches) == min(count, samples)
    assert found.stretches[0].first == 0 and found.stretches[-1].last == count - 1
    for stretch in found.stretches:
        inside = sizes[stretch.first : stretch.last + 1]
        views = [v for v, _ in inside]
        cviews = [c for _, c in inside]
        assert (stretch.view, stretch.cview) == inside[-1]
        assert (stretch.view_low, stretch.view_high) == (min(views), max(views))
        assert (stretch.cview_low, stretch.cview_high) == (min(cviews), max(cviews))


def test_the_views_merge_in_batches_over_a_long_chat() -> None:
    budget = Budget(3000, 1500, 1200, 600)
    core, sizes = replay(2000, budget, 5, set(), set())
    found = sawtooth(core.tree, budget)
    assert found.batches > 10
    assert found.fits > found.batches
    assert max(s.view_high for s in found.stretches) > budget.ceiling
    assert all(s.view_low <= budget.ceiling for s in found.stretches)
    assert found.stretches[-1].view == sizes[-1][0]
