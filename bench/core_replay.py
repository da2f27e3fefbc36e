"""Core replay throughput: messages per second with every node built as soon as it is ready."""

from __future__ import annotations

import random
import time

from evertalk.memory import MemoryCore
from evertalk.memory.view import tiles


def lengths(count: int, seed: int = 7) -> list[int]:
    """Message lengths in bytes: most short, some long, a few huge (tool output)."""
    rng = random.Random(seed)
    out = []
    for _ in range(count):
        roll = rng.random()
        out.append(rng.randrange(10, 400) if roll < 0.5 else rng.randrange(400, 4000))
    return out


def run(count: int = 1_000_000) -> dict[str, float]:
    sizes = lengths(count)
    bodies = {n: "x" * n for n in set(sizes)}
    summaries = ["s" * (180 + (k * 37) % 333) for k in range(997)]
    core = MemoryCore()
    tree, queues = core.tree, core.queues
    started = time.perf_counter()
    for t in range(count):
        core.append("user", bodies[sizes[t]])
        if not tree.built_at(0, t):
            core.build((0, t), summaries[t % 997])
        while (merge := queues.first_merge(tree)) is not None:
            core.build(merge, summaries[merge[1] % 997])
    elapsed = time.perf_counter() - started
    assert tiles(core.view.nodes(), core.t)
    return {
        "messages": count,
        "seconds": elapsed,
        "messages_per_s": count / elapsed,
        "view_lines": len(core.view),
        "view_bytes": core.view.size,
        "cview_bytes": core.cview.size,
    }
