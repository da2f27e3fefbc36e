"""The sawtooth over a chat's whole life (SPEC §3.4, §3.5): the view's and the compaction
view's size after each message, recomputed from the tree, never stored.

The premise is that every node the tree holds was built as soon as it could be: a free node
while its message was appended, any other node right after the step of that message, in the
order a compactor that keeps up builds them. The views are replayed from message 0 under that
schedule with the core's own View and merge order, so the result equals what a MemoryCore fed
the same events would show (a test checks it against one).

Replaying a million messages one by one would cost seconds. Between two batches a view only
grows by its new leaf lines, so the stretch up to the next message that starts a batch (or a
cview fit) is found with a bisection over the running sum of leaf sizes and appended in bulk;
only the messages that merge something are stepped one by one.
"""

from __future__ import annotations

from array import array
from bisect import bisect_right
from dataclasses import dataclass
from itertools import accumulate

from evertalk.memory.budget import Budget
from evertalk.memory.nodes import Node
from evertalk.memory.steps import step_views
from evertalk.memory.text import PLACEHOLDER_SIZE
from evertalk.memory.tree import FREE, UNBUILT, Tree
from evertalk.memory.view import View

SAMPLES = 600
"""Stretches the chat's life is cut into: about one per pixel of a chart."""


@dataclass(frozen=True)
class Stretch:
    """Messages `first` … `last` of the chat: each view's size after `last`, and the least and
    the most it was after any message of the stretch."""

    first: int
    last: int
    view: int
    view_low: int
    view_high: int
    cview: int
    cview_low: int
    cview_high: int

    def as_list(self) -> list[int]:
        return [
            self.first,
            self.last,
            self.view,
            self.view_low,
            self.view_high,
            self.cview,
            self.cview_low,
            self.cview_high,
        ]


@dataclass(frozen=True)
class Sawtooth:
    t: int
    budget: Budget
    stretches: list[Stretch]
    batches: int  # how many times the chat view merged
    fits: int  # how many times the compaction view merged


def sawtooth(tree: Tree, budget: Budget | None = None, samples: int = SAMPLES) -> Sawtooth:
    """The views' sizes over the life of the chat whose tree is `tree` (see the module's
    docstring), in at most `samples` stretches of consecutive messages."""
    replay = _Replay(tree, budget or Budget())
    record = _Record(tree.t, max(1, samples))
    replay.run(record)
    return Sawtooth(tree.t, replay.budget, record.stretches(), replay.batches, replay.fits)


class _AsSoonAsBuilt:
    """The tree as the core saw it at the step of message `t`: every built node that ends
    before `t`, and those ending at `t` that were built free during its append."""

    def __init__(self, tree: Tree) -> None:
        self.sizes = tree.sizes
        self.flags = tree.flags
        self.t = 0

    def built_at(self, level: int, index: int) -> bool:
        try:
            flag = self.flags[level][index]
        except IndexError:
            return False
        if flag == UNBUILT or index < 0:
            return False
        end = ((index + 1) << level) - 1
        return end < self.t or (end == self.t and self.free_up_to(level))

    def size_at(self, level: int, index: int) -> int:
        return self.sizes[level][index]

    def free_up_to(self, level: int) -> bool:
        """The nodes ending at message t, from its leaf up to `level`, are all free."""
        flags, t = self.flags, self.t
        return all(flags[k][t >> k] == FREE for k in range(level + 1))

    def ending(self, t: int) -> list[Node]:
        """The built nodes that end at message t, leaf first."""
        flags = self.flags
        found: list[Node] = []
        level = 0
        while level < len(flags) and (t >> level) < len(flags[level]):
            if flags[level][t >> level] == UNBUILT:
                break  # a parent is never built before its right half
            found.append((level, t >> level))
            if not (t >> level) & 1:
                break  # a left half: its parent ends after t
            level += 1
        return found


class _Replay:
    def __init__(self, tree: Tree, budget: Budget) -> None:
        self.t_end = tree.t
        self.budget = budget
        self.nodes = _AsSoonAsBuilt(tree)
        leaf_flags = tree.flags[0] if tree.flags else bytearray()
        leaf_sizes = tree.sizes[0] if tree.sizes else array("I")
        # each leaf line's size once its message's step is over
        self.after: list[int] = [
            size if flag != UNBUILT else PLACEHOLDER_SIZE
            for size, flag in zip(leaf_sizes, leaf_flags, strict=True)
        ]
        self.leaf_flags = leaf_flags
        self.sums = array("q", accumulate(self.after, initial=0))
        self.view = View()
        self.cview = View()
        self.batches = 0
        self.fits = 0

    def run(self, record: _Record) -> None:
        t = 0
        while t < self.t_end:
            if self.view.shrinking or self.cview.shrinking:
                self.step(t)
                record.one(t, self.view.size, self.cview.size)
                t += 1
                continue
            stop = min(
                self._next_over(t, self.view.size, self.budget.ceiling),
                self._next_over(t, self.cview.size, self.budget.cceiling),
            )
            if stop > t:
                record.rising(t, stop, self.view.size, self.cview.size, self.sums)
                self._append_all(t, stop)
            if stop < self.t_end:
                self.step(stop)
                record.one(stop, self.view.size, self.cview.size)
            t = stop + 1

    def _during(self, t: int) -> int:
        """What leaf t's line counts while its step runs: a free leaf is built by then."""
        return self.after[t] if self.leaf_flags[t] == FREE else PLACEHOLDER_SIZE

    def _next_over(self, t: int, size: int, limit: int) -> int:
        """The first message from t on whose step finds the view over `limit` once its line is
        appended, with only leaf lines appended before it; `t_end` if none does."""
        sums, base = self.sums, size - self.sums[t]
        # a line counts at most PLACEHOLDER_SIZE more during its step than after it
        u = max(t, bisect_right(sums, limit - base - PLACEHOLDER_SIZE) - 1)
        while u < self.t_end:
            if base + sums[u] + self._during(u) > limit:
                return u
            u += 1
        return self.t_end

    def _append_all(self, start: int, stop: int) -> None:
        ids = range(start, stop)
        sizes = self.after[start:stop]
        grown = self.sums[stop] - self.sums[start]
        for view in (self.view, self.cview):
            view.lines.update(dict.fromkeys(ids, 0))
            view.sizes.update(zip(ids, sizes, strict=True))
            view.size += grown

    def step(self, t: int) -> None:
        """Message t, as MemoryCore.append and the builds that follow it at once."""
        nodes = self.nodes
        nodes.t = t
        ending = nodes.ending(t)
        free = [node for node in ending if nodes.free_up_to(node[0])]
        self._tell_stuck(free)
        self._step_views(t, self._during(t))
        if self.leaf_flags[t] not in (UNBUILT, FREE):
            for view in (self.view, self.cview):
                view.resize_leaf(t, self.after[t])
        self._tell_stuck(ending[len(free) :])

    def _tell_stuck(self, built: list[Node]) -> None:
        for view in (self.view, self.cview):
            if view.stuck is not None:
                view.stuck.built.extend(built)

    def _step_views(self, t: int, line: int) -> None:
        step = step_views(self.view, self.cview, t, line, self.budget, self.nodes)
        self.cview = step.cview
        self.batches += step.merged
        self.fits += step.fitted


class _Record:
    """The stretches' figures, filled as the replay goes."""

    def __init__(self, t: int, samples: int) -> None:
        self.t = t
        self.count = min(t, samples)
        empty = [0] * self.count
        self.figures = {
            name: list(empty) for name in ("view", "vlow", "vhigh", "cview", "clow", "chigh")
        }
        self.seen = [False] * self.count

    def _first(self, stretch: int) -> int:
        return stretch * self.t // self.count

    def _stretch(self, message: int) -> int:
        return ((message + 1) * self.count - 1) // self.t

    def one(self, message: int, view: int, cview: int) -> None:
        self._note(self._stretch(message), view, view, cview, cview)
        self._last(message, view, cview)

    def rising(self, start: int, stop: int, view: int, cview: int, sums: array[int]) -> None:
        """Messages start … stop−1, after each of which both views have grown by the lines
        appended since `start`, and nothing else."""
        stretch = self._stretch(start)
        while stretch < self.count and self._first(stretch) < stop:
            low = max(start, self._first(stretch))
            high = min(stop, self._first(stretch + 1)) - 1
            grown_low = sums[low + 1] - sums[start]
            grown_high = sums[high + 1] - sums[start]
            self._note(
                stretch, view + grown_low, view + grown_high, cview + grown_low, cview + grown_high
            )
            self._last(high, view + grown_high, cview + grown_high)
            stretch += 1

    def _note(self, stretch: int, vlow: int, vhigh: int, clow: int, chigh: int) -> None:
        figures = self.figures
        if not self.seen[stretch]:
            self.seen[stretch] = True
            figures["vlow"][stretch], figures["vhigh"][stretch] = vlow, vhigh
            figures["clow"][stretch], figures["chigh"][stretch] = clow, chigh
            return
        figures["vlow"][stretch] = min(figures["vlow"][stretch], vlow)
        figures["vhigh"][stretch] = max(figures["vhigh"][stretch], vhigh)
        figures["clow"][stretch] = min(figures["clow"][stretch], clow)
        figures["chigh"][stretch] = max(figures["chigh"][stretch], chigh)

    def _last(self, message: int, view: int, cview: int) -> None:
        stretch = self._stretch(message)
        if message == self._first(stretch + 1) - 1:
            self.figures["view"][stretch] = view
            self.figures["cview"][stretch] = cview

    def stretches(self) -> list[Stretch]:
        f = self.figures
        return [
            Stretch(
                self._first(k),
                self._first(k + 1) - 1,
                f["view"][k],
                f["vlow"][k],
                f["vhigh"][k],
                f["cview"][k],
                f["clow"][k],
                f["chigh"][k],
            )
            for k in range(self.count)
        ]
