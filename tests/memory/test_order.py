"""The merge order (SPEC §3.3): most due pair with a built parent, oldest on ties, exactly."""

from __future__ import annotations

from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st
from memory_reference import due, due_first, merge_at, most_due, sibling_pairs
from memory_reference import tiles as ref_tiles

from budget import examples
from evertalk.memory.order import due_from_first, due_key, merge_down
from evertalk.memory.view import View

Node = tuple[int, int]


class AllBuilt:
    def built_at(self, level: int, index: int) -> bool:
        return True

    def size_at(self, level: int, index: int) -> int:
        return 1


class Some:
    """Nodes built only where listed; a node's size is a simple function of it."""

    def __init__(self, built: set[Node]) -> None:
        self.built = built

    def built_at(self, level: int, index: int) -> bool:
        return (level, index) in self.built

    def size_at(self, level: int, index: int) -> int:
        assert (level, index) in self.built, "only built parents are merged in"
        return node_size((level, index))


def node_size(node: Node) -> int:
    return 1 + (node[0] * 7 + node[1] * 3) % 50


def make_view(nodes: list[Node]) -> View:
    return View.of(nodes, node_size)


def lines_over(count: int):  # type: ignore[no-untyped-def]
    return lambda view: len(view) > count


# -- the worked example -------------------------------------------------------------------

EXAMPLE = [(2, 0), (2, 1), (0, 8), (0, 9)]  # 0+4, 4+4, 8+1, 9+1 at T = 10


def test_worked_example_dues() -> None:
    assert due(10, 2, 0) == Fraction(3, 4)
    assert due(10, 0, 8) == 1
    assert due_first(10, 2, 0) == Fraction(5, 2)
    assert due_first(10, 0, 8) == 2
    assert due_key(10, 0, 8) > due_key(10, 2, 0)
    assert due_from_first(10, 2, 0) > due_from_first(10, 0, 8)


def test_worked_example_correct_rule_merges_8_9() -> None:
    view = make_view(EXAMPLE)
    assert merge_down(view, 10, AllBuilt(), lines_over(3)) == 1
    assert view.nodes() == [(2, 0), (2, 1), (1, 4)]  # 0+4, 4+4, 8+2: push's list at t = 9


def test_worked_example_wrong_rule_merges_0_7() -> None:
    view = make_view(EXAMPLE)
    assert merge_down(view, 10, AllBuilt(), lines_over(3), key=due_from_first) == 1
    assert view.nodes() == [(3, 0), (0, 8), (0, 9)]  # 0+8, 8+1, 9+1


def test_worked_example_without_built_parent_merges_the_other_pair() -> None:
    view = make_view(EXAMPLE)
    merge_down(view, 10, Some({(3, 0)}), lines_over(3))
    assert view.nodes() == [(3, 0), (0, 8), (0, 9)]
    view = make_view(EXAMPLE)
    assert merge_down(view, 10, Some(set()), lines_over(0)) == 0
    assert view.nodes() == EXAMPLE


# -- exactness ----------------------------------------------------------------------------


def binary_prefix(count: int) -> list[Node]:
    """Lines tiling 0 … count−1 from big to small, with no sibling pair among them."""
    lines, start = [], 0
    for level in reversed(range(count.bit_length())):
        if count >> level & 1:
            lines.append((level, start >> level))
            start += 1 << level
    return lines


def shifted(lines: list[Node], offset: int) -> list[Node]:
    return [(level, ((index << level) + offset) >> level) for level, index in lines]


def test_equal_dues_across_levels() -> None:
    # "a pair of one-message lines that ended 3 messages ago is exactly as due as a pair of
    # 1,024-message lines that ended 3,072 messages ago"
    t = 8191
    assert due(t, 0, 8187) == due(t, 10, 3) == 3
    assert due_key(t, 0, 8187) == due_key(t, 10, 3)
    # in one tiling view (T = 4095): a pair of 1,024-message lines ending 2,048 back and a
    # pair of leaves ending 2 back are equally due (2); the oldest merges first
    t = 4095
    nodes = [(10, 0), (10, 1), *shifted(binary_prefix(2044), 2048)]
    nodes += [(0, 4092), (0, 4093), (0, 4094)]
    assert ref_tiles(nodes, t)
    assert [nodes[p] for p in sibling_pairs(nodes)] == [(10, 0), (0, 4092)]
    assert due(t, 10, 0) == due(t, 0, 4092) == 2
    assert due_key(t, 10, 0) == due_key(t, 0, 4092)
    view = make_view(nodes)
    merge_down(view, t, AllBuilt(), lines_over(len(nodes) - 1))
    assert view.nodes()[0] == (11, 0)
    assert (0, 4092) in view.nodes()
    # with the older pair's parent unbuilt, the newer one goes
    view = make_view(nodes)
    merge_down(view, t, Some({(1, 2046)}), lines_over(len(nodes) - 1))
    assert view.nodes()[-2:] == [(1, 2046), (0, 4094)]


def naive_float_due(t: int, level: int, index: int) -> float:
    """(T+1)/2^l − i − 2 computed in floating point: what the spec forbids."""
    return (t + 1) / 2**level - index - 2


def test_exact_where_floating_point_ties() -> None:
    s = 2**60
    nodes = [(60, 0), (2, s // 4), (2, s // 4 + 1), (0, s + 8), (0, s + 9)]
    t = s + 10
    assert sum(1 << level for level, _ in nodes) == t
    assert due(t, 2, s // 4) == Fraction(3, 4) and due(t, 0, s + 8) == 1
    # floating point cannot tell these apart, so "oldest on ties" would merge the wrong pair
    assert naive_float_due(t, 2, s // 4) == naive_float_due(t, 0, s + 8)
    assert due_key(t, 0, s + 8) > due_key(t, 2, s // 4)
    view = make_view(nodes)
    merge_down(view, t, AllBuilt(), lines_over(len(nodes) - 1))
    assert view.nodes() == [(60, 0), (2, s // 4), (2, s // 4 + 1), (1, (s + 8) // 2)]


def test_exact_where_floating_point_misorders() -> None:
    # the older pair is less due by 2^-40, but floats make it look more due
    s, level = 2**62, 40
    j = s >> level
    pairs_end = s + 2 * 2**level
    nodes = [(62, 0), (level, j), (level, j + 1), *shifted(binary_prefix(2**level - 4), pairs_end)]
    t = pairs_end + 2**level - 2
    nodes += [(0, t - 2), (0, t - 1)]
    assert sum(1 << lv for lv, _ in nodes) == t
    assert sibling_pairs(nodes) == [1, len(nodes) - 2]
    old, new = due(t, level, j), due(t, 0, t - 2)
    assert new == 1 and old == 1 - Fraction(1, 2**level)
    assert naive_float_due(t, level, j) >= naive_float_due(t, 0, t - 2)
    assert due_key(t, 0, t - 2) > due_key(t, level, j)
    view = make_view(nodes)
    merge_down(view, t, AllBuilt(), lines_over(len(nodes) - 1))
    assert view.nodes()[-1] == (1, (t - 2) // 2)
    assert (level, j) in view.nodes()


@given(st.integers(0, 50), st.integers(0, 10**6), st.integers(0, 50), st.integers(0, 10**6))
def test_due_key_orders_like_fractions(la: int, ia: int, lb: int, ib: int) -> None:
    t = max((ia + 2) << la, (ib + 2) << lb) + 17
    a, b = due(t, la, ia), due(t, lb, ib)
    ka, kb = due_key(t, la, ia), due_key(t, lb, ib)
    assert (ka > kb) == (a > b) and (ka == kb) == (a == b)
    fa, fb = due_first(t, la, ia), due_first(t, lb, ib)
    ka, kb = due_from_first(t, la, ia), due_from_first(t, lb, ib)
    assert (ka > kb) == (fa > fb) and (ka == kb) == (fa == fb)


# -- merge_down against the reference ------------------------------------------------------


@st.composite
def views_and_built(draw: st.DrawFn) -> tuple[list[Node], int, set[Node], int]:
    t = draw(st.integers(1, 80))
    lines: list[Node] = [(0, i) for i in range(t)]
    for _ in range(draw(st.integers(0, 60))):
        pairs = sibling_pairs(lines)
        if not pairs:
            break
        lines = merge_at(lines, draw(st.sampled_from(pairs)))
    parents = [(lv, ix) for lv in range(1, 8) for ix in range(t >> lv)]
    built = set(draw(st.lists(st.sampled_from(parents), max_size=40))) if parents else set()
    built |= {line for line in lines if line[0] > 0}
    keep = draw(st.integers(0, len(lines)))
    return lines, t, built, keep


@settings(max_examples=examples(150), deadline=None)
@given(views_and_built(), st.booleans())
def test_merge_down_is_the_greedy_rule(case: tuple[list[Node], int, set[Node], int], wrong: bool):  # type: ignore[no-untyped-def]
    lines, t, built, keep = case
    rule = due_first if wrong else due
    expected, merges = list(lines), 0
    while len(expected) > keep:
        p = most_due(expected, t, lambda n: n in built, rule)
        if p is None:
            break
        expected = merge_at(expected, p)
        merges += 1
    view = make_view(lines)
    key = due_from_first if wrong else due_key
    assert merge_down(view, t, Some(built), lines_over(keep), key=key) == merges
    assert view.nodes() == expected
    assert view.size == sum(node_size(n) for n in expected)
    assert list(view.sizes.values()) == [node_size(n) for n in expected]
    if len(expected) > keep:
        # stopped for want of built parents: none is left
        assert all(
            (expected[p][0] + 1, expected[p][1] // 2) not in built for p in sibling_pairs(expected)
        )
