"""The sizes that shape the views and the compactor's window (SPEC §3, §4.1)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Budget:
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
