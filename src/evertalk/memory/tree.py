"""What the core knows of the tree: which nodes are built, their sizes, and the few texts it needs.

Sizes and flags of every node live in compact per-level arrays (a million messages cost a
few megabytes). Texts are kept only where the core itself needs them: the input of every
unbuilt leaf, and the text of every built node whose parent is not built yet (to make a
free parent, or a parent's cut input). Everything else is the store's business.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TypeVar

from evertalk.memory.nodes import Node
from evertalk.memory.text import LINE_LIMIT, PLACEHOLDER_SIZE, cut_utf8, merge_input, utf8_len

UNBUILT = 0
BUILT = 1  # written by a model
FREE = 2  # its input fit in one line (SPEC §2.3)
CUT = 3  # its input cut after the third failure (SPEC §2.5)


@dataclass(frozen=True)
class Built:
    """A node the core built by itself; the shell must make it durable."""

    level: int
    index: int
    text: str
    flag: int

    @property
    def node(self) -> Node:
        return (self.level, self.index)


def free_leaf(node_input: str) -> str | None:
    """A leaf's text when its input is its own line (it fits in one), else None: a model
    writes it."""
    # a str of more than 512 characters never fits; skip encoding it
    fits = len(node_input) <= LINE_LIMIT and utf8_len(node_input) <= LINE_LIMIT
    return node_input if fits else None


class Tree:
    def __init__(self) -> None:
        self.t = 0
        self.sizes: list[array[int]] = []
        self.flags: list[bytearray] = []
        self.texts: dict[Node, str] = {}
        self.inputs: dict[int, str] = {}

    # -- reading ------------------------------------------------------------------------

    def count(self, level: int) -> int:
        """How many nodes of this level exist."""
        return self.t >> level

    def flag(self, node: Node) -> int:
        level, index = node
        if level >= len(self.flags) or index >= len(self.flags[level]) or index < 0:
            return UNBUILT
        return self.flags[level][index]

    def is_built(self, node: Node) -> bool:
        return self.built_at(node[0], node[1])

    def unbuilt_count(self, level: int | None = None) -> int:
        """How many nodes (of one level, or of all) wait to be built: a C-speed count of the
        flags, no walk over nodes."""
        rows = self.flags if level is None else self.flags[level : level + 1]
        return sum(row.count(UNBUILT) for row in rows)

    def built_at(self, level: int, index: int) -> bool:
        try:
            return self.flags[level][index] != UNBUILT and index >= 0
        except IndexError:
            return False

    def size_at(self, level: int, index: int) -> int:
        return self.sizes[level][index]

    def size(self, node: Node) -> int:
        return self.sizes[node[0]][node[1]]

    def line_size(self, node: Node) -> int:
        """What a line costs in a view: its text's bytes, or the placeholder's."""
        level, index = node
        if self.flags[level][index] == UNBUILT:
            return PLACEHOLDER_SIZE
        return self.sizes[level][index]

    def input_of(self, node: Node) -> str:
        """The input of an unbuilt node whose sources are built."""
        level, index = node
        if level == 0:
            return self.inputs[index]
        texts = self.texts
        return merge_input(texts[(level - 1, 2 * index)], texts[(level - 1, 2 * index + 1)])

    def text_of(self, node: Node) -> str | None:
        """The text of a built node, if the core still holds it."""
        return self.texts.get(node)

    # -- growing ------------------------------------------------------------------------

    def add_message(self, node_input: str) -> None:
        """Message T arrives: its leaf and every parent it completes come into existence."""
        t = self.t
        self.t = t + 1
        self.inputs[t] = node_input
        level = 0
        while True:
            if level == len(self.sizes):
                self.sizes.append(array("I"))
                self.flags.append(bytearray())
            if len(self.sizes[level]) < self.t >> level:
                self.sizes[level].append(0)
                self.flags[level].append(UNBUILT)
            if (self.t >> level) & 1:
                break
            level += 1

    def mark_built(self, node: Node, text: str, flag: int) -> None:
        level, index = node
        self.sizes[level][index] = utf8_len(text)
        self.flags[level][index] = flag
        if not self.built_at(level + 1, index >> 1):  # else a lost child, built again: no use
            self.texts[node] = text
        if level == 0:
            del self.inputs[index]
        else:
            del self.texts[(level - 1, 2 * index)]
            del self.texts[(level - 1, 2 * index + 1)]

    def free_text(self, node: Node) -> str | None:
        """The text of a free node whose sources are built, or None when a model is needed."""
        level, index = node
        if level == 0:
            return free_leaf(self.inputs[index])
        below = self.sizes[level - 1]
        if below[2 * index] + 1 + below[2 * index + 1] > LINE_LIMIT:
            return None
        texts = self.texts
        return merge_input(texts[(level - 1, 2 * index)], texts[(level - 1, 2 * index + 1)])

    def cut_text(self, node: Node) -> str:
        """The node's input cut to one line: its text after a third failure (SPEC §2.5)."""
        return cut_utf8(self.input_of(node))

    # -- restoring ----------------------------------------------------------------------

    @classmethod
    def from_arrays(cls, t: int, sizes: list[array[int]], flags: list[bytearray]) -> Tree:
        """A tree of `t` messages over the given rows, one per level. A row of the right length
        is taken as it is, not copied (at a million messages a copy of them all is ten
        megabytes): the caller hands it over. Short rows are padded, long ones cut."""
        tree = cls()
        tree.t = t
        for level in range(t.bit_length()):
            count = t >> level
            size_row = sizes[level] if level < len(sizes) else array("I")
            flag_row = flags[level] if level < len(flags) else bytearray()
            tree.sizes.append(_fitted(size_row, count))
            tree.flags.append(_fitted(flag_row, count))
        return tree

    def unbuilt(self, level: int) -> Iterator[int]:
        """Indexes of the existing unbuilt nodes of a level, in order (a C-speed search)."""
        row = self.flags[level]
        index = row.find(UNBUILT)
        while index >= 0:
            yield index
            index = row.find(UNBUILT, index + 1)

    def wanted(self) -> tuple[list[Node], list[int]]:
        """After from_arrays: the built nodes whose texts the core needs, and the leaves whose
        inputs it needs (the unbuilt ones)."""
        nodes: list[Node] = []
        for level in range(1, len(self.flags) + 1):
            below = self.flags[level - 1]
            pending = list(self.unbuilt(level)) if level < len(self.flags) else []
            if len(below) & 1:
                pending.append(len(below) >> 1)  # the right edge: a child with no sibling yet
            for index in pending:
                for child in (2 * index, 2 * index + 1):
                    if child < len(below) and below[child] != UNBUILT:
                        nodes.append((level - 1, child))
        return nodes, list(self.unbuilt(0)) if self.flags else []

    def supply(self, texts: dict[Node, str], inputs: dict[int, str]) -> None:
        self.texts.update(texts)
        self.inputs.update(inputs)


_Row = TypeVar("_Row", "array[int]", bytearray)


def _fitted(row: _Row, count: int) -> _Row:
    if len(row) > count:
        del row[count:]
    elif len(row) < count:
        row.extend(
            bytes(count - len(row)) if isinstance(row, bytearray) else [0] * (count - len(row))
        )
    return row
