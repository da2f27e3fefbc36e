"""The pure memory core: nodes, views, merge order, compaction view, ready queues.

Nothing in this package touches files, clocks, the network or an event loop:
events go in (a message appended, a node built, a compaction failed) and state
comes out. The store, the compactor and the agent are shells around it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from evertalk.memory.budget import Budget
from evertalk.memory.nodes import Node, node_name, parse_name

if TYPE_CHECKING:
    from evertalk.memory.core import MemoryCore


def __getattr__(name: str) -> object:
    """MemoryCore when first asked for: a client that reads a constant of the package (the app)
    need not load the whole core."""
    if name == "MemoryCore":
        from evertalk.memory.core import MemoryCore

        return MemoryCore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["Budget", "MemoryCore", "Node", "node_name", "parse_name"]
