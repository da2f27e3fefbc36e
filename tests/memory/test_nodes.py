"""Tree arithmetic (SPEC §0): names id+n, their refusals, relatives, existence."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from evertalk.memory.nodes import (
    children,
    exists,
    first,
    last,
    node_name,
    parent,
    parse_name,
    sibling,
    width,
)

nodes = st.tuples(st.integers(0, 40), st.integers(0, 2**40))


def test_spec_example_name() -> None:
    assert node_name((3, 5)) == "40+8"
    assert parse_name(40, 8) == (3, 5)


@pytest.mark.parametrize(
    ("node", "name"),
    [((0, 0), "0+1"), ((0, 81), "81+1"), ((6, 1), "64+64"), ((4, 5), "80+16"), ((1, 0), "0+2")],
)
def test_names(node: tuple[int, int], name: str) -> None:
    assert node_name(node) == name
    start, count = map(int, name.split("+"))
    assert parse_name(start, count) == node


@pytest.mark.parametrize(
    ("start", "count"),
    [
        (1, 2),  # id not a multiple of n (SPEC §6.5 example)
        (0, 3),  # n not a power of two (SPEC §6.5 example)
        (0, 0),
        (0, -1),
        (0, -2),
        (-1, 1),
        (-2, 2),
        (2, 4),
        (4, 6),
        (12, 8),
        (3, 12),
    ],
)
def test_parse_name_refusals(start: int, count: int) -> None:
    assert parse_name(start, count) is None


@given(nodes)
def test_name_round_trip(node: tuple[int, int]) -> None:
    level, index = node
    start, count = map(int, node_name(node).split("+"))
    assert start == index * 2**level
    assert count == 2**level
    assert parse_name(start, count) == node


@given(st.integers(0, 10_000), st.integers(1, 5_000))
def test_parse_name_accepts_exactly_the_aligned_powers_of_two(start: int, count: int) -> None:
    valid = count & (count - 1) == 0 and start % count == 0
    assert (parse_name(start, count) is not None) == valid


@given(nodes)
def test_span(node: tuple[int, int]) -> None:
    level, index = node
    assert first(node) == index * 2**level
    assert last(node) == (index + 1) * 2**level - 1
    assert width(node) == 2**level
    assert last(node) - first(node) + 1 == width(node)


@given(nodes)
def test_relatives(node: tuple[int, int]) -> None:
    level, index = node
    up = parent(node)
    assert up == (level + 1, index // 2)
    assert node in children(up)
    assert sibling(node) in children(up)
    assert sibling(node) != node
    assert sibling(sibling(node)) == node
    assert sibling(node)[0] == level
    assert {index, sibling(node)[1]} == {2 * (index // 2), 2 * (index // 2) + 1}
    # the parent covers exactly its two children, left then right
    left, right = children(up)
    assert left == (level, 2 * (index // 2)) and right == (level, 2 * (index // 2) + 1)
    assert first(up) == first(left) and last(up) == last(right)
    assert last(left) + 1 == first(right)


def test_children_of_spec_example() -> None:
    assert children((3, 5)) == ((2, 10), (2, 11))
    assert parent((2, 11)) == (3, 5)
    assert sibling((2, 10)) == (2, 11)


@given(nodes, st.integers(0, 2**42))
def test_exists(node: tuple[int, int], t: int) -> None:
    level, index = node
    assert exists(node, t) == ((index + 1) * 2**level <= t)


@pytest.mark.parametrize(
    ("node", "t", "expected"),
    [
        ((0, 0), 0, False),
        ((0, 0), 1, True),
        ((1, 0), 1, False),
        ((1, 0), 2, True),
        ((3, 5), 47, False),
        ((3, 5), 48, True),
        ((0, -1), 10, False),
        ((-1, 0), 10, False),
    ],
)
def test_exists_edges(node: tuple[int, int], t: int, expected: bool) -> None:
    assert exists(node, t) is expected
