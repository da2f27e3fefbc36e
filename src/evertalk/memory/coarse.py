"""A view fitted at render time, for a chat that is behind.

While the compactor is far behind (an import, a long time offline, a lost tree), free lines
cannot merge until their parents are built, and a view can grow to hundreds of kilobytes. The
core's view changes only at a message (SPEC §3.4), so summaries built while a turn waits do not
shrink it by themselves. A turn then renders a *fitted* copy, for itself only; the core's view,
which view.json saves, is never touched. The copy never exceeds the view's ceiling, however
large the model's window: the window is an upper bound, not the target (SPEC §3.2).

1. `merged_to_fit`: the batch rule (SPEC §3.3) on a copy, with the nodes built now, down to the
   floor as the next batch will go: what that batch will do anyway, so nothing is shown that
   the next turn would not show too.
2. `coarsened`: when that is not enough, the oldest lines are replaced by the fewest aligned
   nodes that tile their messages. A built one shows its text; an unbuilt one shows
   `id+n|[not yet summarized: messages a–b]`, and zoom opens it like any other line. A new
   coarse stretch is made long enough for the rest to fit the floor, and the same stretch is
   kept at the next turns while the lines after it fit the ceiling: with nothing built
   meanwhile the copy then only grows at its end, and the cache prefix holds (SPEC §7).

Sizes here are the rendered text's bytes, heads, newlines and `<chat>` tags included, so that
the fitted copy is within both the view's ceiling and the room the model's window leaves.
`summaries_to_go` estimates how many nodes must still be built for step 1 alone to give a view
that fits and is settled.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from evertalk.memory.budget import Budget
from evertalk.memory.nodes import Node, node_name
from evertalk.memory.order import BuiltNodes, merge_down
from evertalk.memory.text import PLACEHOLDER, PLACEHOLDER_SIZE, utf8_len
from evertalk.memory.tree import UNBUILT, Tree
from evertalk.memory.view import View, frame

FRAME = len("<chat>") + len("\n</chat>")
"""The bytes of a rendered view around its lines, each of which brings its own newline (an
empty view renders as `<chat>\\n</chat>`)."""

TYPICAL_LINE = 250
"""The bytes a summary not built yet is expected to take: a real line averages about 250
(SPEC §2.1). Only the estimate of the work left uses it."""

SizeOf = Callable[[Node], int]
"""The bytes of a line's text as rendered."""


def coarse_text(node: Node) -> str:
    """What an unbuilt line above the leaves shows: the messages it stands for."""
    level, index = node
    first = index << level
    return f"[not yet summarized: messages {first}–{first + (1 << level) - 1}]"


def aligned_cover(start: int, end: int) -> list[Node]:
    """The fewest aligned nodes that tile messages start … end − 1, oldest first: at each step
    the largest node that starts there and ends in the range (a binary decomposition)."""
    cover: list[Node] = []
    while start < end:
        level = (end - start).bit_length() - 1
        if start:
            level = min(level, (start & -start).bit_length() - 1)  # the alignment of start
        cover.append((level, start >> level))
        start += 1 << level
    return cover


def shown_size(nodes: BuiltNodes) -> SizeOf:
    """Bytes of each line's text as `render` shows it: a built node's size (flattening never
    adds bytes), else the placeholder of a leaf or the coarse text of a node above."""

    def size_of(node: Node) -> int:
        level, index = node
        if nodes.built_at(level, index):
            return nodes.size_at(level, index)
        return PLACEHOLDER_SIZE if level == 0 else utf8_len(coarse_text(node))

    return size_of


def line_bytes(node: Node, size: int) -> int:
    """One rendered line: the newline before it, `id+n|` and its text."""
    return len(node_name(node)) + 2 + size


def rendered_size(nodes: Iterable[Node], size_of: SizeOf) -> int:
    """The bytes of the rendered view of these lines."""
    return FRAME + sum(line_bytes(node, size_of(node)) for node in nodes)


def render(nodes: Iterable[Node], line_of: Callable[[Node], str | None]) -> str:
    """Like the view's rendering (SPEC §3.2), but an unbuilt node above the leaves shows which
    messages it stands for: it is a coarse line. `line_of` gives a built node's rendered line
    (`view.render_line`), None for an unbuilt one."""
    lines = []
    for node in nodes:
        line = line_of(node)
        if line is None:
            shown = PLACEHOLDER if node[0] == 0 else coarse_text(node)
            line = f"{node_name(node)}|{shown}"
        lines.append(line)
    return frame(lines)


def _over(room: int, t: int) -> Callable[[View], bool]:
    """Whether a view's rendering may pass `room`, counting each head at its longest for the
    chat (`id+n|` with id and n of as many digits as T): exact heads would cost a walk of the
    view after every merge. A view it passes may still fit; one it does not pass does."""
    head = 2 * len(str(t)) + 3
    return lambda view: FRAME + view.size + head * len(view) > room


def merged_to_fit(
    view: View, t: int, nodes: BuiltNodes, room: int, floor: int | None = None
) -> View:
    """A copy of the view merged by the batch rule (most due pair whose parent is built, SPEC
    §3.3) until its rendering fits `room` and, when given, its size is at most `floor` (as a
    batch goes); or until no pair has a built parent."""
    scratch = view.copy()
    over_room = _over(room, t)
    if floor is None:
        merge_down(scratch, t, nodes, over_room)
    else:
        merge_down(scratch, t, nodes, lambda v: v.size > floor or over_room(v))
    return scratch


def coarsened(
    lines: Sequence[Node], size_of: SizeOf, room: int, *, keep: int = 0, low: int | None = None
) -> tuple[list[Node], int]:
    """The lines with the oldest of them replaced by the fewest aligned nodes that tile the
    same messages, so that the whole fits `room`; and the end of the stretch replaced (0: the
    lines fit as they are). When nothing fits, every message is in the stretch.

    `keep`: the end of a stretch to keep if the lines after it still fit `room` (the stretch of
    the last turn). Otherwise the stretch is made as short as it can be for the whole to fit
    `low` (default `room`), or failing that `room`: the room between the two is what later
    lines grow into before the stretch has to move.

    Each node of the cover holds whole lines (a line is aligned, and each aligned range inside
    the stretch lies inside one node of its binary decomposition), so the result coarsens the
    lines and tiles what they tile."""
    after = [0] * (len(lines) + 1)  # the rendered bytes of lines[k:]
    for k in range(len(lines) - 1, -1, -1):
        after[k] = after[k + 1] + line_bytes(lines[k], size_of(lines[k]))
    kept = _kept(lines, after, size_of, room, keep) if keep else None
    if kept is not None:
        return kept
    if low is not None and low < room:
        fitted, end = _shortest(lines, after, size_of, low)
        if rendered_size(fitted, size_of) <= low:
            return fitted, end
    return _shortest(lines, after, size_of, room)


def _kept(
    lines: Sequence[Node], after: list[int], size_of: SizeOf, room: int, keep: int
) -> tuple[list[Node], int] | None:
    """The lines with messages 0 … keep − 1 as a cover, when a line ends at `keep` and that
    fits `room`; else None."""
    for k, (level, index) in enumerate(lines):
        end = (index + 1) << level
        if end == keep:
            cover = aligned_cover(0, end)
            if rendered_size(cover, size_of) + after[k + 1] <= room:
                return [*cover, *lines[k + 1 :]], end
            return None
        if end > keep:
            return None
    return None


def _shortest(
    lines: Sequence[Node], after: list[int], size_of: SizeOf, room: int
) -> tuple[list[Node], int]:
    """The shortest stretch from message 0 whose cover and the lines after it fit `room`."""
    # the lines kept alone pass the room up to here: no cover can make those fit (a cheap
    # skip over most of a long view, whose covers would each cost a dozen lookups)
    start = 0
    while start < len(lines) and FRAME + after[start] > room:
        start += 1
    end = 0
    for k in range(start, len(lines) + 1):
        if k:
            level, index = lines[k - 1]
            end = (index + 1) << level
        cover = aligned_cover(0, end)
        if rendered_size(cover, size_of) + after[k] <= room:
            return [*cover, *lines[k:]], end
    return aligned_cover(0, end), end


@dataclass(frozen=True)
class Fitted:
    """The lines a turn renders: they tile the chat. The first ones tile messages 0 …
    coarse_end − 1 as a coarse stretch when coarse_end > 0."""

    lines: list[Node]
    coarse_end: int = 0
    fits: bool = True
    """False when not even these lines fit the room they were fitted to."""
    recent: str = ""
    """The newest unsummarized messages word for word, for a turn on a chat that is behind
    (SPEC §6.1): they go after the view, with the message, and are no part of it."""


def fit(
    view: View, t: int, nodes: BuiltNodes, room: int, budget: Budget | None = None, keep: int = 0
) -> Fitted:
    """The view as a turn may send it (SPEC §3.2, §6.2): as it is when it is within the view's
    ceiling (its size, SPEC §3.1) and its rendering within `room`, the bytes the model's window
    leaves; else a copy whose rendering is within both: merged by the batch rule with the nodes
    built now, else with its oldest lines coarsened (`keep`: the coarse end of the last fitted
    copy, kept while it fits). When not even the coarsest view fits, that one. Without a
    `budget`, the room is the only bound."""
    size_of = shown_size(nodes)
    lines = view.nodes()
    over_ceiling = budget is not None and view.size > budget.ceiling
    if not over_ceiling and rendered_size(lines, size_of) <= room:
        return Fitted(lines)
    cap, low = room, None
    if budget is not None:
        cap, low = min(room, budget.ceiling), min(room, budget.floor)
    floor = budget.floor if over_ceiling and budget is not None else None
    lines = merged_to_fit(view, t, nodes, cap, floor).nodes()
    if rendered_size(lines, size_of) <= cap:
        return Fitted(lines)
    coarse, end = coarsened(lines, size_of, cap, keep=keep, low=low)
    return Fitted(coarse, end)


def collapsed(lines: Sequence[Node], is_built: Callable[[Node], bool]) -> list[Node]:
    """The lines with each run of unbuilt leaves replaced by the fewest aligned nodes that tile
    its messages: those nodes are unbuilt too (a parent is built only after its halves), so a
    run of a thousand placeholders renders as a few coarse lines (SPEC §6.1)."""
    result: list[Node] = []
    run_start = run_end = 0
    for node in lines:
        level, index = node
        if level == 0 and not is_built(node):
            if run_end != index:
                result += aligned_cover(run_start, run_end)
                run_start = index
            run_end = index + 1
            continue
        result += aligned_cover(run_start, run_end)
        run_start = run_end = 0
        result.append(node)
    result += aligned_cover(run_start, run_end)
    return result


class _Finished:
    """The tree as it will be once every node exists built: real sizes where built, a typical
    line's size elsewhere."""

    def __init__(self, tree: Tree, typical: int) -> None:
        self.tree = tree
        self.typical = typical

    def built_at(self, level: int, index: int) -> bool:
        return index >= 0 and (index + 1) << level <= self.tree.t

    def size_at(self, level: int, index: int) -> int:
        if self.tree.built_at(level, index):
            return self.tree.size_at(level, index)
        return self.typical


def unbuilt_under(tree: Tree, node: Node) -> int:
    """The unbuilt nodes of the subtree of `node`, itself included: what building it takes (a
    built node's subtree is all built, since a parent is built only after its halves)."""
    level, index = node
    count = 0
    for below in range(level + 1):
        shift = level - below
        count += tree.flags[below].count(UNBUILT, index << shift, (index + 1) << shift)
    return count


def summaries_to_go(view: View, t: int, tree: Tree, room: int, typical: int = TYPICAL_LINE) -> int:
    """About how many nodes must still be built before the view, merged by the batch rule,
    fits `room` with every line built: the batch is run on the view as it will look once every
    node is built (unbuilt ones at `typical` bytes), and each of its lines counts the unbuilt
    nodes under it. Free nodes are counted as work, so it errs high; it is recomputed as
    summaries land."""
    finished = _Finished(tree, typical)

    def size_of(node: Node) -> int:
        return finished.size_at(*node)

    scratch = View.of(view.nodes(), size_of)
    if rendered_size(scratch.nodes(), size_of) > room:
        merge_down(scratch, t, finished, _over(room, t))
    return sum(unbuilt_under(tree, line) for line in scratch)
