"""The sizes that shape the views and the compactor's window (SPEC §3, §4.1)."""

from __future__ import annotations

from dataclasses import dataclass

VIEW_SHARE = 0.4
"""The share of a small context window the view may take at its ceiling: the rest is for the
system prompt and the tools (about a quarter of an 8K window), the new message, tool results and
the reply."""
BYTES_PER_TOKEN = 3
"""Bytes of view text per token, counted low (prose runs about 4, code and ids fewer): a view
sized with it fits the window it was sized for."""
SMALLEST_CEILING = 4_096
"""Eight full lines: a view smaller than this could not tell the chat's parts apart."""


@dataclass(frozen=True)
class Budget:
    """The view's ceiling and floor and the compaction view's, in bytes (SPEC §3), and the window
    of unbuilt leaves a leaf may start within (§4.1)."""

    ceiling: int = 128_000  # the view starts a batch once it is strictly above this
    floor: int = 64_000  # … and merges until it is at or under this
    cceiling: int = 32_000  # the same pair for the compaction view
    cfloor: int = 16_000
    window: int = 8  # a leaf may start with fewer than this many unbuilt leaves before it

    def __post_init__(self) -> None:
        if not (0 <= self.floor <= self.ceiling and 0 <= self.cfloor <= self.cceiling):
            raise ValueError("each floor must be between 0 and its ceiling")
        if self.window < 1:
            raise ValueError("the window must be at least 1")

    @classmethod
    def for_window(cls, tokens: int | None) -> Budget:
        """The budgets for a turn model with a context window of `tokens` (None: unknown, a
        large cloud model's). The default 128K/64K (and 32K/16K for the compaction view) holds
        for any window that fits it; a smaller window scales all four down alike, the view's
        ceiling being VIEW_SHARE of the window, so that a turn on it always has room."""
        default = cls()
        if tokens is None:
            return default
        ceiling = int(tokens * VIEW_SHARE) * BYTES_PER_TOKEN
        if ceiling >= default.ceiling:
            return default
        ceiling = max(ceiling, SMALLEST_CEILING)
        return cls(ceiling, ceiling // 2, ceiling // 4, ceiling // 8)

    def sizes(self) -> tuple[int, int, int, int]:
        """The four sizes, as view.json records them."""
        return self.ceiling, self.floor, self.cceiling, self.cfloor
