"""Law 10: the core's work per message does not grow with the size of the tree (SPEC §4.1)."""

from __future__ import annotations

import random

from evertalk.memory import Budget, MemoryCore
from evertalk.memory.tree import Tree


class CountingTree(Tree):
    """Counts the core's lookups of built nodes: the work a scan of the tree would show."""

    lookups = 0

    def built_at(self, level: int, index: int) -> bool:
        CountingTree.lookups += 1
        return super().built_at(level, index)


def _lookups_per_message(core: MemoryCore, rng: random.Random, count: int) -> float:
    CountingTree.lookups = 0
    tree = core.tree
    for _ in range(count):
        t = core.t
        core.append("echo", "z" * rng.randrange(100, 900))
        if not tree.built_at(0, t):
            core.build((0, t), "s" * rng.randrange(150, 450))
        while (merge := core.queues.first_merge(tree)) is not None:
            core.build(merge, "m" * rng.randrange(150, 450))
    return CountingTree.lookups / count


def test_lookups_per_message_stay_flat_as_the_tree_grows() -> None:
    rng = random.Random(4)
    core = MemoryCore(Budget(ceiling=8_000, floor=4_000, cceiling=2_000, cfloor=1_000))
    core.tree = CountingTree()
    _lookups_per_message(core, rng, 2_000)  # warm up: the views reach their sawtooth
    early = _lookups_per_message(core, rng, 4_000)
    _lookups_per_message(core, rng, 50_000)
    late = _lookups_per_message(core, rng, 4_000)
    assert core.t == 60_000
    assert late < early * 1.5, (early, late)


def _behind(count: int) -> Tree:
    """A chat whose leaves are all free and whose parents are all unbuilt (say, just
    imported): its views stay over their floors, so every batch waits, at every message."""
    core = MemoryCore()
    core.tree = CountingTree()
    for k in range(count):
        core.append("user", f"message {k} " + "w" * 300)
    return core.tree


def test_a_fold_at_open_over_a_chat_that_is_behind_is_linear() -> None:
    """The batch waits at every message of the fold: looking again at every line each time
    made opening such a chat quadratic (3,000 messages took seconds)."""
    per_message = []
    for count in (1_000, 4_000):
        tree = _behind(count)
        CountingTree.lookups = 0
        core, _, _ = MemoryCore.resume(tree, None)
        assert core.view.shrinking and len(core.view) > count // 3
        per_message.append(CountingTree.lookups / count)
    assert per_message[1] < per_message[0] * 1.5, per_message


def test_appending_to_a_chat_that_is_behind_is_linear() -> None:
    """Each message of such a chat builds its free leaf, and its batch waits: looking again at
    every line made each message cost as much as the view has lines."""
    per_message = []
    for count in (1_000, 4_000):
        CountingTree.lookups = 0
        tree = _behind(count)
        per_message.append(CountingTree.lookups / count)
        assert tree.t == count
    assert per_message[1] < per_message[0] * 1.5, per_message
