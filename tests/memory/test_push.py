"""Push equivalence (SPEC §9, laws 6 and 7), against a push written from the spec's words."""

from __future__ import annotations

import pytest
from memory_reference import push_view

from evertalk.memory.order import due_from_first, merge_down
from evertalk.memory.view import View

Entry = tuple[int, int]  # (state, keep bit)
STEPS = 20_001


def push(entries: list[Entry], state: int) -> list[Entry]:
    """SPEC §9: push a state onto a list kept newest first."""
    if not entries:
        return [(state, 0)]
    newest, bit = entries[0]
    if bit == 0:
        return [(newest, 1), *entries[1:]]  # the bit becomes 1 and the state is dropped
    return [(state, 0), *push(entries[1:], newest)]  # carry the old newest down


class AllBuilt:
    def built_at(self, level: int, index: int) -> bool:
        return True

    def size_at(self, level: int, index: int) -> int:
        return 1


def names(view: list[tuple[int, int]]) -> list[str]:
    return [f"{index << level}+{1 << level}" for level, index in view]


TABLE = [
    ("0:0", "0+1"),
    ("0:1", "0+2"),
    ("2:0, 0:0", "0+2, 2+1"),
    ("2:1, 0:0", "0+2, 2+2"),
    ("4:0, 0:1", "0+4, 4+1"),
    ("4:1, 0:1", "0+4, 4+2"),
    ("6:0, 4:0, 0:0", "0+4, 4+2, 6+1"),
    ("6:1, 4:0, 0:0", "0+4, 4+2, 6+2"),
    ("8:0, 4:1, 0:0", "0+4, 4+4, 8+1"),
    ("8:1, 4:1, 0:0", "0+4, 4+4, 8+2"),
]


def test_first_ten_steps_of_the_table() -> None:
    entries: list[Entry] = []
    for t, (listed, as_view) in enumerate(TABLE):
        entries = push(entries, t)
        assert ", ".join(f"{s}:{b}" for s, b in entries) == listed
        assert ", ".join(names(push_view(entries, t))) == as_view


def test_push_is_a_bijective_base_2_counter() -> None:
    entries: list[Entry] = []
    for t in range(3_000):
        entries = push(entries, t)
        bits = [bit for _, bit in entries]
        assert sum((1 + d) * 2**j for j, d in enumerate(bits)) == t + 1
        view = push_view(entries, t)  # oldest first; asserts every line is a tree node
        levels = [level for level, _ in reversed(view)]  # newest first, like the entries
        assert levels == [j + d for j, d in enumerate(bits)]


def run_views() -> tuple[list[bool], list[bool]]:
    """Laws 6 and 7 over t = 0 … 20,000: does each view equal push's list at each step?"""
    entries: list[Entry] = []
    right, wrong = View(), View()
    right_agrees, wrong_agrees = [], []
    built = AllBuilt()
    for t in range(STEPS):
        entries = push(entries, t)
        budget = len(entries)

        def over(view: View, budget: int = budget) -> bool:
            return len(view) > budget

        expected = push_view(entries, t)
        right.append(t, 1)
        merge_down(right, t + 1, built, over)
        right_agrees.append(right.nodes() == expected)
        wrong.append(t, 1)
        merge_down(wrong, t + 1, built, over, key=due_from_first)
        wrong_agrees.append(wrong.nodes() == expected)
        assert len(wrong) <= budget and len(right) <= budget
    return right_agrees, wrong_agrees


@pytest.fixture(scope="module")
def agreement() -> tuple[list[bool], list[bool]]:
    return run_views()


def test_law_6_push_equivalence(agreement: tuple[list[bool], list[bool]]) -> None:
    right, _ = agreement
    assert len(right) == STEPS
    disagree = [t for t, ok in enumerate(right) if not ok]
    assert disagree == []


def test_law_7_wrong_rule_is_detectably_wrong(agreement: tuple[list[bool], list[bool]]) -> None:
    _, wrong = agreement
    assert sum(wrong) == 481
    assert wrong.index(False) == 9
    assert all(wrong[:9])
