"""What a forget tells the index and the search index of each file it rewrote (`Index.rewrote`).
In a module of its own, apart from the index: only a forget makes one, and an open need not load
it."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Rewrite:
    """A log or tree file rewritten in place by a forget (SPEC §12), as the index must follow
    it: where each record line was and now is, and what went."""

    name: str
    """The file, relative to the chat folder."""
    grew: int
    """Bytes the file grew by (less than 0: it shrank)."""
    messages: list[tuple[int, int, int, int]]
    """(id, old offset, new offset, new length) of each message line the file now holds."""
    nodes: list[tuple[int, int, int, int, int]]
    """(l, i, old offset, new offset, new length) of each node line the file now holds."""
    removed: list[tuple[int, int]]
    """(old offset, length) of each line that went."""
    gone: list[tuple[int, int]]
    """Nodes whose lines went: they are unbuilt now."""

    def moved(self, offset: int) -> int:
        """Where a line boundary at `offset` of the old file is in the new one (the lines that
        went shift it; a tree file's lines keep their length)."""
        return offset - sum(length for start, length in self.removed if start < offset)
