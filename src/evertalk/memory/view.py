"""A view: lines that tile messages 0 … T−1, oldest first, with their total size (SPEC §3.1)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

from evertalk.memory.nodes import Node, node_name
from evertalk.memory.text import PLACEHOLDER, flatten


@dataclass(slots=True)
class Stuck:
    """A batch that ran out of pairs to merge with `count` messages in the chat, and the nodes
    built since: only they, and the leaf lines appended since, can make a pair now."""

    count: int
    built: list[Node] = field(default_factory=list)


class View:
    """Lines as a dict start → level.

    Dicts keep insertion order; appends add ever larger starts and a merge deletes the right
    line and relabels the left one in place, so the dict stays ordered oldest first.
    """

    __slots__ = ("lines", "shrinking", "size", "sizes", "stuck")

    def __init__(self) -> None:
        self.lines: dict[int, int] = {}
        self.sizes: dict[int, int] = {}  # start → the line's size as counted
        self.size = 0
        self.shrinking = False
        self.stuck: Stuck | None = None
        """Set when a batch ran out of pairs to merge (see MemoryCore._merge)."""

    def copy(self) -> View:
        other = View()
        other.lines = dict(self.lines)
        other.sizes = dict(self.sizes)
        other.size = self.size
        other.shrinking = self.shrinking
        other.stuck = (
            None if self.stuck is None else Stuck(self.stuck.count, list(self.stuck.built))
        )
        return other

    def nodes(self) -> list[Node]:
        return [(level, start >> level) for start, level in self.lines.items()]

    def __iter__(self) -> Iterator[Node]:
        for start, level in self.lines.items():
            yield (level, start >> level)

    def __len__(self) -> int:
        return len(self.lines)

    def append(self, start: int, size: int) -> None:
        self.lines[start] = 0
        self.sizes[start] = size
        self.size += size

    def merge(self, start: int, level: int, parent_size: int) -> None:
        """Replace the pair of `level` lines starting at `start` by their parent."""
        right = start + (1 << level)
        del self.lines[right]
        self.size += parent_size - self.sizes.pop(right) - self.sizes[start]
        self.lines[start] = level + 1
        self.sizes[start] = parent_size

    def resize_leaf(self, start: int, size: int) -> None:
        """A leaf line got built: only its counted size changes (SPEC §3.1)."""
        if self.lines.get(start) == 0:
            self.size += size - self.sizes[start]
            self.sizes[start] = size

    @classmethod
    def of(cls, nodes: Iterable[Node], line_size: Callable[[Node], int]) -> View:
        view = cls()
        for node in nodes:
            level, index = node
            start = index << level
            view.lines[start] = level
            size = line_size(node)
            view.sizes[start] = size
            view.size += size
        return view


def render_line(node: Node, text: str | None) -> str:
    """`id+n|text`, flattened; the placeholder for an unbuilt line (SPEC §3.2)."""
    return f"{node_name(node)}|{PLACEHOLDER if text is None else flatten(text)}"


def render_lines(nodes: Iterable[Node], text_of: Callable[[Node], str | None]) -> Iterator[str]:
    for node in nodes:
        yield render_line(node, text_of(node))


def frame(lines: Iterable[str]) -> str:
    """The rendered lines inside the view's frame."""
    return "\n".join(["<chat>", *lines, "</chat>"])


def render(nodes: Iterable[Node], text_of: Callable[[Node], str | None]) -> str:
    return frame(render_lines(nodes, text_of))


def tiles(nodes: Iterable[Node], t: int) -> bool:
    """The nodes cover messages 0 … t−1 exactly once, in order."""
    expected = 0
    for level, index in nodes:
        if level < 0 or index < 0 or index << level != expected:
            return False
        expected += 1 << level
    return expected == t


def coarsens(coarse: Iterable[Node], fine: Iterable[Node]) -> bool:
    """Each line of `fine` lies inside one line of `coarse` (both tile the same range)."""
    fine_iter = iter(fine)
    covered = 0
    for level, index in coarse:
        end = (index + 1) << level
        while covered < end:
            node = next(fine_iter, None)
            if node is None or node[1] << node[0] != covered:
                return False
            covered += 1 << node[0]
        if covered != end:
            return False
    return next(fine_iter, None) is None
