"""An independent model of the memory core, written from SPEC §2, §3 and §4.1 alone.

It is deliberately naive: views are plain lists of (l, i), dues are `Fraction`s, and every
question is answered by scanning. The tests compare the real core with it event by event.
Nothing here imports from `evertalk`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from fractions import Fraction

Node = tuple[int, int]

LINE_LIMIT = 512
PLACEHOLDER_BYTES = len(b"(not summarized yet: zoom it)")  # 29
UNBUILT, BUILT, FREE, CUT = 0, 1, 2, 3


def nbytes(text: str) -> int:
    return len(text.encode("utf-8"))


def first_of(node: Node) -> int:
    return node[1] * 2 ** node[0]


def last_of(node: Node) -> int:
    return (node[1] + 1) * 2 ** node[0] - 1


def cut_prefix(text: str, limit: int = LINE_LIMIT) -> str:
    """The longest prefix, whole characters only, whose UTF-8 encoding fits in `limit` bytes."""
    used = 0
    for position, char in enumerate(text):
        used += nbytes(char)
        if used > limit:
            return text[:position]
    return text


def due(t: int, level: int, index: int) -> Fraction:
    """SPEC §3.3: (T − last) / 2^l, last = (i + 2)·2^l − 1 the pair's last message."""
    last = (index + 2) * 2**level - 1
    return Fraction(t - last, 2**level)


def due_first(t: int, level: int, index: int) -> Fraction:
    """The wrong rule of SPEC §8.1: measured from the pair's first message."""
    return Fraction(t - index * 2**level, 2**level)


def sibling_pairs(lines: list[Node]) -> list[int]:
    """Positions p where lines[p], lines[p + 1] are a sibling pair (l, 2j), (l, 2j + 1)."""
    return [
        p
        for p in range(len(lines) - 1)
        if lines[p][0] == lines[p + 1][0]
        and lines[p][1] % 2 == 0
        and lines[p + 1][1] == lines[p][1] + 1
    ]


def most_due(
    lines: list[Node],
    t: int,
    built: Callable[[Node], bool],
    rule: Callable[[int, int, int], Fraction] = due,
) -> int | None:
    """Position of the most due pair whose parent is built, the oldest on ties; None if none."""
    best: tuple[Fraction, int] | None = None
    for p in sibling_pairs(lines):
        level, index = lines[p]
        if not built((level + 1, index // 2)):
            continue
        value = rule(t, level, index)
        if best is None or value > best[0]:  # strictly greater: ties keep the older pair
            best = (value, p)
    return None if best is None else best[1]


def merge_at(lines: list[Node], p: int) -> list[Node]:
    level, index = lines[p]
    return [*lines[:p], (level + 1, index // 2), *lines[p + 2 :]]


def tiles(lines: Iterable[Node], t: int) -> bool:
    covered: list[int] = []
    for node in lines:
        if node[0] < 0 or node[1] < 0:
            return False
        covered.extend(range(first_of(node), last_of(node) + 1))
    return covered == list(range(t))


def coarsens(coarse: list[Node], fine: list[Node]) -> bool:
    """Every line of `fine` lies inside one line of `coarse`; both tile the same messages."""
    coarse_ends = {last_of(node) for node in coarse}
    fine_ends = {last_of(node) for node in fine}
    if sum(2 ** n[0] for n in coarse) != sum(2 ** n[0] for n in fine):
        return False
    return coarse_ends <= fine_ends


def push_view(entries: list[tuple[int, int]], t: int) -> list[Node]:
    """Taelin's push list (newest first, (state, bit)) read as a view at step t (SPEC §9)."""
    starts = [state for state, _bit in reversed(entries)]
    stops = [*starts[1:], t + 1]
    view = []
    for start, stop in zip(starts, stops, strict=True):
        length = stop - start
        level = length.bit_length() - 1
        assert length == 2**level and start % length == 0, (start, stop)
        view.append((level, start // length))
    return view


class RefCore:
    """The memory core of SPEC §2.3, §2.5, §3.1–§3.7 and §4.1, as plainly as possible."""

    def __init__(self, ceiling: int, floor: int, cceiling: int, cfloor: int, window: int) -> None:
        self.ceiling, self.floor = ceiling, floor
        self.cceiling, self.cfloor = cceiling, cfloor
        self.window = window
        self.inputs: list[str] = []
        self.texts: dict[Node, str] = {}
        self.flags: dict[Node, int] = {}
        self.failures: dict[Node, int] = {}
        self.view: list[Node] = []
        self.cview: list[Node] = []
        self.shrinking = False
        self.cshrinking = False
        self.merged = False
        self.fitted = False

    # -- facts ------------------------------------------------------------------------------

    @property
    def t(self) -> int:
        return len(self.inputs)

    def exists(self, node: Node) -> bool:
        level, index = node
        return level >= 0 and index >= 0 and (index + 1) * 2**level <= self.t

    def built(self, node: Node) -> bool:
        return node in self.texts

    def sources_built(self, node: Node) -> bool:
        level, index = node
        return level == 0 or (
            self.built((level - 1, 2 * index)) and self.built((level - 1, 2 * index + 1))
        )

    def valid_target(self, node: Node) -> bool:
        """May this node be built or failed (Appendix A)?"""
        return self.exists(node) and not self.built(node) and self.sources_built(node)

    def input_of(self, node: Node) -> str:
        level, index = node
        if level == 0:
            return self.inputs[index]
        return self.texts[(level - 1, 2 * index)] + "\n" + self.texts[(level - 1, 2 * index + 1)]

    def line_size(self, node: Node) -> int:
        return nbytes(self.texts[node]) if self.built(node) else PLACEHOLDER_BYTES

    def size(self, lines: list[Node]) -> int:
        return sum(self.line_size(node) for node in lines)

    def pending(self) -> list[Node]:
        """Every node that exists, is unbuilt and has its sources built."""
        found = []
        level = 0
        while 2**level <= self.t:
            for index in range(self.t // 2**level):
                if self.valid_target((level, index)):
                    found.append((level, index))
            level += 1
        return found

    def ready(self) -> list[Node]:
        unbuilt_leaves = [i for i in range(self.t) if not self.built((0, i))]
        leaves = [(0, i) for i in unbuilt_leaves[: self.window]]
        merges = [node for node in self.pending() if node[0] > 0]
        return sorted(leaves + merges)

    def context(self, node: Node) -> list[Node]:
        """SPEC §3.7: cview lines ending at or before b (a leaf: before a), up to the first
        unbuilt line; then, while they add up to more than the cview's ceiling, the oldest
        left out."""
        a, b = first_of(node), last_of(node)
        lines = []
        for line in self.cview:
            end = last_of(line)
            if (end >= a) if node[0] == 0 else (end > b):
                break
            if not self.built(line):
                break
            lines.append(line)
        while self.size(lines) > self.cceiling:
            lines.pop(0)
        return lines

    # -- events -----------------------------------------------------------------------------

    def _mark(self, node: Node, text: str, flag: int) -> None:
        self.texts[node] = text
        self.flags[node] = flag
        self.failures.pop(node, None)

    def _cascade(self, node: Node) -> list[tuple[Node, str, int]]:
        """`node` was just built: build every free parent this completes, upward."""
        out = []
        while True:
            level, index = node
            sibling = (level, index ^ 1)
            if not (self.exists(sibling) and self.built(sibling)):
                return out
            parent = (level + 1, index // 2)
            text = self.input_of(parent)
            if nbytes(text) > LINE_LIMIT:
                return out
            self._mark(parent, text, FREE)
            out.append((parent, text, FREE))
            node = parent

    def append(self, kind: str, text: str) -> list[tuple[Node, str, int]]:
        t = self.t
        self.inputs.append(kind + ": " + text)
        out = []
        leaf = (0, t)
        if nbytes(self.inputs[t]) <= LINE_LIMIT:
            self._mark(leaf, self.inputs[t], FREE)
            out = [(leaf, self.inputs[t], FREE), *self._cascade(leaf)]
        self.step(t)
        return out

    def build(self, node: Node, text: str) -> list[tuple[Node, str, int]]:
        assert self.valid_target(node)
        self._mark(node, text, BUILT)
        return self._cascade(node)

    def fail(self, node: Node) -> list[tuple[Node, str, int]]:
        assert self.valid_target(node)
        self.failures[node] = self.failures.get(node, 0) + 1
        if self.failures[node] < 3:
            return []
        return self.cut(node)

    def cut(self, node: Node) -> list[tuple[Node, str, int]]:
        """SPEC §2.5, at once: a node whose input cannot be sent is built from it cut."""
        assert self.valid_target(node)
        text = cut_prefix(self.input_of(node))
        self._mark(node, text, CUT)
        return [(node, text, CUT), *self._cascade(node)]

    # -- views ------------------------------------------------------------------------------

    def fit(self, lines: list[Node], t_count: int, limit: int) -> tuple[list[Node], int]:
        merges = 0
        while self.size(lines) > limit:
            p = most_due(lines, t_count, self.built)
            if p is None:
                break
            lines = merge_at(lines, p)
            merges += 1
        return lines, merges

    def step(self, t: int) -> None:
        """SPEC §3.4 then §3.5 at message t."""
        count = t + 1
        self.view = [*self.view, (0, t)]
        merged = False
        if self.size(self.view) > self.ceiling:
            self.shrinking = True
        if self.shrinking:
            self.view, merges = self.fit(self.view, count, self.floor)
            merged = merges > 0
            self.shrinking = self.size(self.view) > self.floor
        self.merged = merged
        self.cview = [*self.cview, (0, t)]
        self.fitted = merged or self.size(self.cview) > self.cceiling or self.cshrinking
        if merged:
            self.cview = list(self.view)
        if self.fitted:
            self.cview, _ = self.fit(self.cview, count, self.cfloor)
            self.cshrinking = self.size(self.cview) > self.cfloor

    def resume_batch(self) -> None:
        """The batch steps of SPEC §3.4 and §3.5 without a message: each view whose flag is
        set merges on, with the nodes built now; a view that merged hands the cview a copy."""
        merged = False
        if self.shrinking:
            self.view, merges = self.fit(self.view, self.t, self.floor)
            merged = merges > 0
            self.shrinking = self.size(self.view) > self.floor
        if merged:
            self.cview = list(self.view)
        if merged or self.cshrinking:
            self.cview, _ = self.fit(self.cview, self.t, self.cfloor)
            self.cshrinking = self.size(self.cview) > self.cfloor

    def fold(self) -> None:
        """SPEC §3.6 step 4: from empty views, every message again, with the nodes built now."""
        self.view, self.cview = [], []
        self.shrinking = self.cshrinking = False
        for t in range(self.t):
            self.step(t)

    def restore(
        self, t: int, view: list[Node], cview: list[Node], shrinking: bool, cshrinking: bool
    ) -> None:
        """SPEC §3.6: load saved views, then catch up on messages t … T−1."""
        self.view, self.cview = list(view), list(cview)
        self.shrinking, self.cshrinking = shrinking, cshrinking
        self.failures.clear()
        for message in range(t, self.t):
            self.step(message)
