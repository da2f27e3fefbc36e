"""The follower rule as a state machine: machines commit changes to one stream (messages and
lines), each machine's core takes them through its `Follower` from batches that come late, out
of order, repeated or cut short, and any apply may fail (the read behind it broke off). However
it goes, a machine's core always equals a core fed the stream up to its position, and once the
batches stop failing every core equals every other, view and cview included.

This covers what the real checker (tests_chaos/) cannot reach: a failure at every possible read.
"""

from __future__ import annotations

import contextlib
from typing import Any

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, rule

from evertalk.memory.budget import Budget
from evertalk.memory.core import MemoryCore
from evertalk.pgstore.chats import Change
from evertalk.pgstore.follow import Follower

MACHINES = ("home", "office", "laptop")
BUDGET = Budget(ceiling=2400, floor=1200, cceiling=800, cfloor=400)
"""Small views, so that a few dozen messages make them merge."""


class ReadBrokeOff(Exception):
    """The database went away while a change was being read."""


def fold(core: MemoryCore, change: Change) -> None:
    """A change into a core, as the shared chat folds it."""
    what: dict[str, Any] = change.what
    if "append" in what:
        core.append("user", what["append"])
    else:
        l, i, text = what["build"]  # noqa: E741
        core.build((l, i), text)


def state(core: MemoryCore) -> tuple[object, ...]:
    return core.saved(), core.tree.unbuilt_count(), core.t


class FollowingMachines(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.stream: list[Change] = []
        self.reference = MemoryCore(BUDGET)  # fed every change as it is committed
        self.cores = {name: MemoryCore(BUDGET) for name in MACHINES}
        self.followers = {name: Follower(name) for name in MACHINES}
        self.failing: set[tuple[str, int]] = set()

    @initialize()
    def start(self) -> None:
        self._commit("home", {"append": "the first message " * 8})

    def _commit(self, machine: str, what: dict[str, Any]) -> None:
        change = Change(len(self.stream) + 1, machine, what)
        self.stream.append(change)
        fold(self.reference, change)

    @rule(machine=st.sampled_from(MACHINES), words=st.integers(1, 60))
    def append(self, machine: str, words: int) -> None:
        self._commit(machine, {"append": f"message {len(self.stream)} " + "word " * words})

    @rule(machine=st.sampled_from(MACHINES), pick=st.integers(0, 50), size=st.integers(20, 300))
    def build(self, machine: str, pick: int, size: int) -> None:
        ready = self.reference.ready()
        if ready:
            l, i = ready[pick % len(ready)]  # noqa: E741
            self._commit(machine, {"build": [l, i, f"line {l}+{i} " + "x" * size]})

    @rule(
        machine=st.sampled_from(MACHINES),
        data=st.data(),
        fail_at=st.one_of(st.none(), st.integers(0, 6)),
    )
    def read(self, machine: str, data: st.DataObject, fail_at: int | None) -> None:
        """A batch from the feed: some of what follows its position, shuffled, repeated, and
        an apply that breaks off `fail_at` changes in."""
        follower = self.followers[machine]
        after = self.stream[follower.seq :]
        batch = data.draw(st.lists(st.sampled_from(after), max_size=12)) if after else []
        core, applied = self.cores[machine], [0]

        def apply(change: Change) -> None:
            if fail_at is not None and applied[0] == fail_at:
                raise ReadBrokeOff
            fold(core, change)
            applied[0] += 1

        with contextlib.suppress(ReadBrokeOff):
            follower.feed(batch, apply)

    @rule(machine=st.sampled_from(MACHINES))
    def read_the_rest(self, machine: str) -> None:
        """A read of everything after the position (`changes_since`) that does not fail."""
        follower = self.followers[machine]
        follower.feed(self.stream[follower.seq :], lambda change: fold(self.cores[machine], change))

    @invariant()
    def each_core_is_the_stream_up_to_its_position(self) -> None:
        for name in MACHINES:
            seq = self.followers[name].seq
            replay = MemoryCore(BUDGET)
            for change in self.stream[:seq]:
                fold(replay, change)
            assert state(self.cores[name]) == state(replay), name

    def teardown(self) -> None:
        for name in MACHINES:
            self.read_the_rest(name)
            assert state(self.cores[name]) == state(self.reference), name


FollowingMachines.TestCase.settings = settings(max_examples=60, stateful_step_count=30)
test_following_machines = FollowingMachines.TestCase
