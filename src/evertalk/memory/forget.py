"""Forgetting (SPEC §12), the core's part: which nodes lose their text, and the views fixed up.

A forgotten message's leaf and every built node above it hold its words, so all of them go and
are built again from what is left below them. The views may name those nodes; each such line is
replaced by its unbuilt form. Only a leaf may be an unbuilt line (SPEC §3.2), so a line over a
changed message becomes the largest nodes under it that stay built, plus the leaves of the
changed messages: at most about two lines per level for each changed message, not the 2^l
leaves the line covers. The result still tiles the chat, every line with l > 0 is built, and a
compaction view fixed up this way is still a coarsening of the view fixed up this way (a line
is split at the same places in both).

Nothing here touches a file: the store removes the records and the chat opens again over them,
and the core's usual open (SPEC §3.6) queues the unbuilt nodes, building the free ones at once.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from evertalk.memory.core import SavedViews
from evertalk.memory.nodes import Node, exists

BuiltAt = Callable[[int, int], bool]
"""Whether node (l, i) is built."""


def dropped_nodes(
    messages: Iterable[int], nodes: Iterable[Node], t: int, built_at: BuiltAt
) -> list[Node]:
    """The nodes whose records go, sorted by (l, i): the leaf of each changed message, each
    node whose own text changes (a redaction of a summary), and every built node above any of
    them, up to the top of the tree (its text was made from theirs)."""
    found: set[Node] = set()
    top = t.bit_length()
    starts = [(0, message) for message in messages] + list(nodes)
    for level, index in starts:
        for up in range(level, top):
            node = (up, index >> (up - level))
            if node in found:
                break  # the rest of this chain is in already
            if exists(node, t) and built_at(*node):
                found.add(node)
    return sorted(found)


def fix_view(lines: Sequence[Node], stays: BuiltAt) -> list[Node]:
    """The view's lines with each line that loses its text split into the largest nodes
    under it that stay built, and leaves (see the module's text). `stays`: whether a node is
    built once the dropped ones are gone."""
    fixed: list[Node] = []
    for line in lines:
        _split(line, stays, fixed)
    return fixed


def fix_saved(saved: SavedViews, stays: BuiltAt) -> SavedViews:
    """view.json's views fixed up (see fix_view); the batch flags stay as they were (the next
    message goes on with its batch, if one waits)."""
    cview = None if saved.cview is None else fix_view(saved.cview, stays)
    return SavedViews(
        saved.t, fix_view(saved.view, stays), cview, saved.shrinking, saved.cshrinking, saved.budget
    )


def staying(built_at: BuiltAt, dropped: Iterable[Node]) -> BuiltAt:
    """`built_at` once the dropped nodes are gone."""
    gone = set(dropped)
    return lambda level, index: built_at(level, index) and (level, index) not in gone


def _split(node: Node, stays: BuiltAt, into: list[Node]) -> None:
    stack = [node]
    while stack:
        level, index = current = stack.pop()
        if level == 0 or stays(level, index):
            into.append(current)
            continue
        # the right half goes on the stack first, so that the left one comes out first
        stack.append((level - 1, 2 * index + 1))
        stack.append((level - 1, 2 * index))


def rebuild_calls(dropped: Iterable[Node], free_flag: int, flag_of: Callable[[Node], int]) -> int:
    """About how many model calls building the dropped nodes again costs: those that were not
    free (a free node stays free when its input shrinks, and a forgotten leaf's marker is
    short; a node that needed a model may turn free, so this errs high)."""
    return sum(1 for node in dropped if flag_of(node) != free_flag)


__all__ = ["dropped_nodes", "fix_saved", "fix_view", "rebuild_calls", "staying"]
