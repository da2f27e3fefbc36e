"""The pure memory core: nodes, views, merge order, compaction view, ready queues.

Nothing in this package touches files, clocks, the network or an event loop:
events go in (a message appended, a node built, a compaction failed) and state
comes out. The store, the compactor and the agent are shells around it.
"""

from evertalk.memory.budget import Budget
from evertalk.memory.core import MemoryCore
from evertalk.memory.nodes import Node, node_name, parse_name

__all__ = ["Budget", "MemoryCore", "Node", "node_name", "parse_name"]
