"""Tree arithmetic: nodes (l, i), their names `id+n`, spans and relatives (SPEC §0)."""

from __future__ import annotations

Node = tuple[int, int]
"""A node (l, i): level l, index i; it covers messages i·2^l … (i+1)·2^l − 1."""


def first(node: Node) -> int:
    """The id of the first message a node covers."""
    level, index = node
    return index << level


def last(node: Node) -> int:
    """The id of the last message a node covers."""
    level, index = node
    return ((index + 1) << level) - 1


def width(node: Node) -> int:
    return 1 << node[0]


def node_name(node: Node) -> str:
    """`id+n`: node (3, 5) is `40+8`."""
    level, index = node
    return f"{index << level}+{1 << level}"


def parse_name(start: int, count: int) -> Node | None:
    """The node named `start+count`, or None when no node has that name."""
    if start < 0 or count < 1 or count & (count - 1):
        return None
    level = count.bit_length() - 1
    if start % count:
        return None
    return (level, start >> level)


def parent(node: Node) -> Node:
    return (node[0] + 1, node[1] >> 1)


def sibling(node: Node) -> Node:
    return (node[0], node[1] ^ 1)


def children(node: Node) -> tuple[Node, Node]:
    level, index = node
    return (level - 1, 2 * index), (level - 1, 2 * index + 1)


def exists(node: Node, t: int) -> bool:
    """A node exists once all its messages are logged: (i+1)·2^l ≤ T."""
    level, index = node
    if level < 0 or index < 0 or level >= t.bit_length():  # 2^l > T: no such node (yet)
        return False
    return (index + 1) << level <= t
