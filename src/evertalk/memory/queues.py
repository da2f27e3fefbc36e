"""Ready work, kept in queues updated as nodes are built, never found by scanning (SPEC §4.1)."""

from __future__ import annotations

import heapq
from collections import deque

from evertalk.memory.nodes import Node
from evertalk.memory.tree import UNBUILT, Tree


class Queues:
    def __init__(self, window: int) -> None:
        self.window = window
        # unbuilt model leaves in id order; built ones are pruned lazily
        self._leaves: deque[int] = deque()
        self._merges: list[Node] = []  # heap by (l, i) of parents whose halves are built
        self._queued: set[Node] = set()

    def add_leaf(self, index: int) -> None:
        self._leaves.append(index)

    def add_merge(self, node: Node) -> None:
        if node not in self._queued:
            self._queued.add(node)
            heapq.heappush(self._merges, node)

    def done(self, node: Node) -> None:
        """A queued merge got built (by a model, or cut): it leaves the queue."""
        self._queued.discard(node)

    def ready_leaves(self, tree: Tree) -> list[int]:
        """The first `window` unbuilt leaves: each has fewer than `window` unbuilt before it."""
        if not tree.flags:
            return []
        row = tree.flags[0]
        leaves = self._leaves
        found: list[int] = []
        while leaves and len(found) < self.window:
            index = leaves.popleft()
            if row[index] == UNBUILT:
                found.append(index)
        leaves.extendleft(reversed(found))
        return found

    def ready_merges(self, tree: Tree) -> list[Node]:
        """Every queued merge not built yet, lowest level first, then oldest."""
        self._prune(tree)
        return sorted(self._queued)

    def first_merge(
        self, tree: Tree, skip: set[Node] | frozenset[Node] = frozenset()
    ) -> Node | None:
        """The lowest, oldest ready merge not in `skip` (for example, already in flight)."""
        self._prune(tree)
        if not self._merges:
            return None
        merges = self._merges
        if merges[0] not in skip:
            return merges[0]
        # Walk the heap in order: below the top it may still hold merges already built (they
        # left `_queued` but are popped only once they reach the top), so the first len(skip)+1
        # entries need not contain a ready one even when one exists further down.
        frontier = [(merges[0], 0)]
        while frontier:
            node, at = heapq.heappop(frontier)
            if node not in skip and node in self._queued:
                return node
            for child in (2 * at + 1, 2 * at + 2):
                if child < len(merges):
                    heapq.heappush(frontier, (merges[child], child))
        return None

    def merge_count(self) -> int:
        return len(self._queued)

    def _prune(self, tree: Tree) -> None:
        merges = self._merges
        while merges and tree.is_built(merges[0]):
            self._queued.discard(heapq.heappop(merges))
