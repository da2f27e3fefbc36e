"""The merge order (SPEC §3.3): the most due sibling pair whose parent is built, oldest on ties.

due = (T − last) / 2^l with last = (i + 2)·2^l − 1, which equals (T + 1)/2^l − i − 2.
Keys are exact integers: the due scaled by 2^SCALE, so no division ever truncates.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable
from typing import Protocol

from evertalk.memory.view import View

SCALE = 64  # levels never reach 64: a chat would need 2^64 messages


class BuiltNodes(Protocol):
    def built_at(self, level: int, index: int) -> bool: ...

    def size_at(self, level: int, index: int) -> int: ...


DueKey = Callable[[int, int, int], int]
"""(T, l, i) of a pair's left line → an integer that grows with the pair's due."""


def due_key(t: int, level: int, index: int) -> int:
    """The due of the pair (l, i), (l, i + 1), measured from its last message, times 2^SCALE."""
    return ((t + 1) << (SCALE - level)) - ((index + 2) << SCALE)


def due_from_first(t: int, level: int, index: int) -> int:
    """The wrong rule of SPEC §8.1, kept so that the tests can show it is detectably wrong."""
    return (t << (SCALE - level)) - (index << SCALE)


def _pairs(
    lines: dict[int, int],
    t: int,
    is_built: Callable[[int, int], bool],
    key: DueKey,
    starts: Iterable[int] | None,
) -> list[tuple[int, int, int]]:
    """Heap entries (−due, start, level) of the view's sibling pairs whose parent is built,
    among the lines at `starts` (all lines when None)."""
    heap: list[tuple[int, int, int]] = []
    get = lines.get
    found = lines.items() if starts is None else ((s, get(s, -1)) for s in starts)
    for start, level in found:
        if level < 0:
            continue
        index = start >> level
        if index & 1 or get(start + (1 << level)) != level or not is_built(level + 1, index >> 1):
            continue
        heap.append((-key(t, level, index), start, level))
    return heap


def merge_down(
    view: View,
    t: int,
    nodes: BuiltNodes,
    over: Callable[[View], bool],
    key: DueKey = due_key,
    starts: Iterable[int] | None = None,
) -> int:
    """Merge the most due pair with a built parent while `over(view)`; return the merge count.
    `starts`, when given, are the only lines that may begin such a pair now (the caller knows
    the others cannot), so that only they are looked at; each once.

    Each line belongs to exactly one sibling pair, so a heap entry can only leave the heap by
    being merged: no entry ever goes stale. A merge may create one new pair (the parent and
    its sibling), which is pushed then.
    """
    if not over(view):
        return 0
    lines = view.lines
    is_built = nodes.built_at
    heap = _pairs(lines, t, is_built, key, starts)
    heapq.heapify(heap)
    merges = 0
    while heap and over(view):
        _, start, level = heapq.heappop(heap)
        view.merge(start, level, nodes.size_at(level + 1, start >> (level + 1)))
        merges += 1
        up = level + 1
        index = start >> up
        left = (index & ~1) << up
        right = left + (1 << up)
        if lines.get(left) == up and lines.get(right) == up and is_built(up + 1, index >> 1):
            heapq.heappush(heap, (-key(t, up, index & ~1), left, up))
    return merges
