"""A compaction's context (SPEC §3.7), collected walking back from where it ends.

The context of a node is a run of the cview's lines: those that end at or before the node's end
(a leaf's: before its message), oldest first, up to the first unbuilt line; of that run, the
newest lines whose sizes add up to at most a limit, the cview's ceiling. Normally the run is the
whole context. While the chat is behind, free lines cannot merge until their parents are built
and the run can hold thousands of lines: so its end is found directly, and the context is
collected from that end backwards. The cost is a few lookups per line of the context, never a
walk of the cview (or of the tree), because of two facts:

- Lines tile the messages, so the line holding message m starts at m with its low l bits
  cleared, l its level, and the line ending at e has a level no higher than the number of
  trailing zero bits of e: a few lookups find either.
- An unbuilt line is always a leaf (a parent enters a view only once built, and it is built only
  after its halves), so the first unbuilt line is the first unbuilt leaf that is a line.
"""

from __future__ import annotations

from evertalk.memory.nodes import Node
from evertalk.memory.tree import Tree
from evertalk.memory.view import View

MAX_LEVEL = 64  # levels never reach 64: a chat would need 2^64 messages


def compaction_context(cview: View, tree: Tree, node: Node, limit: int) -> list[Node]:
    """The context of `node`: at most `limit` bytes of the cview's lines (sizes as the budget
    counts them), the newest of the run that SPEC §3.7 describes, ending where it ends."""
    end = boundary_at_or_before(cview, bound(node))
    end = first_unbuilt_line(cview, tree, end)
    return lines_back_from(cview, end, limit)


def bound(node: Node) -> int:
    """The message no line of the context may reach: just past a merge, a leaf's own message."""
    level, index = node
    return (index + 1) << level if level else index


def boundary_at_or_before(view: View, position: int) -> int:
    """The last point at or before `position` where one line of the view ends and the next
    starts: `position` itself, or the start of the line that straddles it."""
    if position == 0:
        return 0
    start, level = line_holding(view, position - 1)
    return position if start + (1 << level) == position else start


def line_holding(view: View, message: int) -> tuple[int, int]:
    """(start, level) of the view's line that holds `message`."""
    lines = view.lines
    for level in range(MAX_LEVEL):
        start = (message >> level) << level
        if lines.get(start) == level:
            return start, level
    raise AssertionError(f"no line of the view holds message {message}")


def first_unbuilt_line(view: View, tree: Tree, end: int) -> int:
    """The start of the view's first unbuilt line, if it starts before `end`; else `end`.

    Almost always the first unbuilt leaf: it is skipped only where a lost leaf is being built
    again under a parent that survived (SPEC §2.4), and that parent, built, is the line."""
    lines = view.lines
    for index in tree.unbuilt(0) if tree.flags else ():
        if index >= end:
            break
        if lines.get(index) == 0:
            return index
    return end


def lines_back_from(view: View, end: int, limit: int) -> list[Node]:
    """The longest run of lines ending at `end` whose sizes add up to at most `limit`."""
    lines, sizes = view.lines, view.sizes
    found: list[Node] = []
    total = 0
    while end > 0:
        start, level = line_ending_at(lines, end)
        total += sizes[start]
        if total > limit:
            break
        found.append((level, start >> level))
        end = start
    found.reverse()
    return found


def line_ending_at(lines: dict[int, int], end: int) -> tuple[int, int]:
    """(start, level) of the line that ends just before `end`, a boundary of the lines."""
    for level in range((end & -end).bit_length()):  # up to the trailing zero bits of `end`
        start = end - (1 << level)
        if lines.get(start) == level:
            return start, level
    raise AssertionError(f"no line of the view ends at {end}")
