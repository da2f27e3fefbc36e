"""Tree.unbuilt_count: the flag count agrees with a walk over every existing node."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from evertalk.memory import MemoryCore


@given(st.lists(st.integers(1, 2_000), min_size=1, max_size=60), st.integers(0, 40))
def test_the_count_agrees_with_a_walk(sizes: list[int], builds: int) -> None:
    core = MemoryCore()
    for size in sizes:
        core.append("user", "x" * size)
    for _ in range(builds):
        ready = core.ready()
        if not ready:
            break
        core.build(ready[0], "a line")
    tree = core.tree
    t = core.t
    walk = {
        level: sum(not tree.built_at(level, i) for i in range(t >> level))
        for level in range(t.bit_length())
    }
    assert tree.unbuilt_count() == sum(walk.values())
    assert tree.unbuilt_count(0) == walk.get(0, 0)
