"""A memory core beside what the log and the tree file would hold for it (no tests of its own):
every input it was given and every text it built, so that a test can resume it from its arrays
as a reopen does, with some records gone."""

from __future__ import annotations

from array import array

from evertalk.memory import Budget, MemoryCore
from evertalk.memory.core import SavedViews
from evertalk.memory.nodes import Node
from evertalk.memory.text import leaf_input
from evertalk.memory.tree import UNBUILT, Built, Tree


class History:
    """A core, and every input and text it was given or built, as the log and tree would hold."""

    def __init__(self, budget: Budget) -> None:
        self.budget = budget
        self.core = MemoryCore(budget)
        self.inputs: dict[int, str] = {}
        self.texts: dict[Node, str] = {}

    def append(self, kind: str, text: str) -> None:
        self.inputs[self.core.t] = leaf_input(kind, text)
        self.record(self.core.append(kind, text))

    def build(self, node: Node, text: str) -> None:
        self.texts[node] = text
        self.record(self.core.build(node, text))

    def record(self, built: list[Built]) -> None:
        self.texts.update((b.node, b.text) for b in built)

    def reopen(
        self, lost: set[Node], saved: SavedViews | None
    ) -> tuple[MemoryCore, list[Built], str | None]:
        """Resume from the arrays with the records of `lost` gone."""
        tree = self.core.tree
        sizes = [array("I", row) for row in tree.sizes]
        flags = [bytearray(row) for row in tree.flags]
        for level, index in lost:
            sizes[level][index], flags[level][index] = 0, UNBUILT
        again = Tree.from_arrays(tree.t, sizes, flags)
        nodes, leaves = again.wanted()
        again.supply({n: self.texts[n] for n in nodes}, {i: self.inputs[i] for i in leaves})
        return MemoryCore.resume(again, saved, self.budget)
