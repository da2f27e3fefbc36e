"""One message's step of the two views: the sawtooth of SPEC §3.4, then the compaction view of
§3.5. The rule lives here alone; MemoryCore steps its views with it, and so does the sawtooth's
replay of a chat's whole life (`sawtooth.py`), over a tree whose nodes it builds on time."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from evertalk.memory.budget import Budget
from evertalk.memory.order import BuiltNodes, merge_down
from evertalk.memory.view import Stuck, View


@dataclass(frozen=True)
class Step:
    """What a step left: the compaction view (a new one, copied from the view, when the view
    merged), whether the view merged, and whether fitting the compaction view merged."""

    cview: View
    merged: bool
    fitted: bool


def step_views(
    view: View, cview: View, t: int, line: int, budget: Budget, nodes: BuiltNodes
) -> Step:
    """Message t, whose leaf line is `line` bytes, into both views."""
    view.append(t, line)
    merged = False
    if view.size > budget.ceiling:
        view.shrinking = True
    if view.shrinking:
        floor = budget.floor
        merged = merge_pairs(view, t + 1, nodes, lambda v: v.size > floor) > 0
        view.shrinking = view.size > floor
    if merged:
        cview = view.copy()
        return Step(cview, True, fit_cview(cview, t + 1, budget, nodes) > 0)
    cview.append(t, line)
    fitted = False
    if cview.size > budget.cceiling or cview.shrinking:
        fitted = fit_cview(cview, t + 1, budget, nodes) > 0
    return Step(cview, False, fitted)


def fit_cview(cview: View, count: int, budget: Budget, nodes: BuiltNodes) -> int:
    """fit(cview) of SPEC §3.5 with `count` messages in the chat; the merges it made."""
    cfloor = budget.cfloor
    merges = merge_pairs(cview, count, nodes, lambda v: v.size > cfloor)
    cview.shrinking = cview.size > cfloor
    return merges


def merge_pairs(view: View, count: int, nodes: BuiltNodes, over: Callable[[View], bool]) -> int:
    """merge_down, looking only where a pair can be. A chat that is behind has thousands of
    lines and a batch that waits at every message: scanning them all at each message made
    appending to it, or folding it at open, quadratic. Once a batch ran out of pairs, a pair
    can only come from a node built since (its children's lines) or from the leaf lines
    appended since (a fold at open meets leaves whose parent was built before it)."""
    stuck = view.stuck
    starts: set[int] | None = None
    if stuck is not None:
        starts = set(range(stuck.count & ~1, count, 2))  # the left leaf of each new pair
        starts.update(index << level for level, index in stuck.built if level)
    merges = merge_down(view, count, nodes, over, starts=starts)
    view.stuck = Stuck(count) if over(view) else None
    return merges
