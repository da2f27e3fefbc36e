"""The compactor's policy (`compactor/policy.py`), a pure state machine, checked by its laws
over random runs of events: slots, the order of the work, a failed node's wait, the pause and
its probes, trust, the drain. Time is a number the test gives."""

from __future__ import annotations

import math
from collections.abc import Sequence, Set

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    precondition,
    rule,
)

from evertalk.compactor.line import MAX_REJECTIONS
from evertalk.compactor.policy import (
    BUILT,
    DISTRUST_AT,
    PROBE_FIRST,
    PROBE_MOST,
    RETRY_SECONDS,
    TRUST_AGAIN_BELOW,
    TRUST_WINDOW,
    Event,
    Outcome,
    Policy,
    RefusedEvent,
    State,
    Trust,
)
from evertalk.memory.nodes import Node
from evertalk.providers.base import ProviderError

LEAVES = 24
WINDOW = 8


class Tree:
    """A small stand-in for the memory core's queues: leaves 0..LEAVES-1, their parents
    ready once both halves are built, the first WINDOW unbuilt leaves ready."""

    def __init__(self) -> None:
        self.built: set[Node] = set()
        self.batch: list[Node] = []

    def ready_leaves(self) -> Sequence[int]:
        unbuilt = [i for i in range(LEAVES) if (0, i) not in self.built]
        return unbuilt[:WINDOW]

    def batch_parents(self) -> Sequence[Node]:
        return [node for node in self.batch if self.may_build(node)]

    def merges(self) -> list[Node]:
        return sorted(
            (1, i)
            for i in range(LEAVES // 2)
            if (1, i) not in self.built and {(0, 2 * i), (0, 2 * i + 1)} <= self.built
        )

    def first_merge(self, skip: Set[Node]) -> Node | None:
        return next((node for node in self.merges() if node not in skip), None)

    def may_build(self, node: Node) -> bool:
        level, index = node
        if node in self.built or not 0 <= index < LEAVES >> level or level > 1:
            return False
        return level == 0 or node in self.merges()


def setup_error() -> ProviderError:
    return ProviderError("auth", "the key was refused")


def setup_failed() -> Outcome:
    return Outcome(Event.SETUP_FAILED, "the key was refused", setup_error())


FAILED = Outcome(Event.FAILED, "the model gave no usable line")


nodes = st.tuples(st.integers(0, 1), st.integers(0, LEAVES - 1))


class PolicyRuns(RuleBasedStateMachine):
    """Random runs of what the service tells the policy, with the laws checked at each step."""

    def __init__(self) -> None:
        super().__init__()
        self.slots = 3
        self.policy = Policy(self.slots)
        self.tree = Tree()
        self.now = 0.0
        self.failed_since: dict[Node, float] = {}  # nodes that failed and saw no message since
        self.gap = PROBE_FIRST  # the next probe's gap, as the laws say it grows
        self.probe_due = -math.inf
        self.drained = False

    # -- events ---------------------------------------------------------------------------

    @rule(seconds=st.floats(0, 120, allow_nan=False))
    def time_passes(self, seconds: float) -> None:
        self.now += seconds

    @rule()
    def start(self) -> None:
        before = self.policy.in_flight
        paused = self.policy.state is State.PAUSED
        started = self.policy.start(self.tree, self.now)
        assert len(set(started)) == len(started) and not set(started) & before
        assert not started or len(self.policy.in_flight) <= self.policy.limit
        if self.policy.state is State.DRAINING:
            assert started == []
        if paused:  # nothing but one probe, and only once it is due
            assert len(started) <= 1
            assert not started or self.now >= self.probe_due
        for node in started:
            assert self.tree.may_build(node)
            assert node not in self.policy.failed_at
            since = self.failed_since.pop(node, None)
            if since is not None and not paused:  # a failed node waits for its retry
                assert self.policy.waited_on and self.now - since >= RETRY_SECONDS

    @precondition(lambda self: bool(self.policy.in_flight))
    @rule(data=st.data(), end=st.sampled_from([BUILT, Outcome(Event.REJECTED)]))
    def built(self, data: st.DataObject, end: Outcome) -> None:
        node = data.draw(st.sampled_from(sorted(self.policy.in_flight)))
        held = self.held()
        released = self.policy.ended(node, end, self.now)
        assert released == bool(held) and not held & set(self.policy.failed_at)
        self.gap = PROBE_FIRST
        self.tree.built.add(node)  # built from its line, or cut
        self.policy.landed(node)
        assert self.policy.state is not State.PAUSED

    @precondition(lambda self: bool(self.policy.in_flight))
    @rule(data=st.data())
    def too_long(self, data: st.DataObject) -> None:
        node = data.draw(st.sampled_from(sorted(self.policy.in_flight)))
        state, error = self.policy.state, self.policy.setup_error
        assert not self.policy.ended(node, Outcome(Event.TOO_LONG), self.now)
        assert (self.policy.state, self.policy.setup_error) == (state, error)  # no call made
        self.tree.built.add(node)  # cut
        self.policy.landed(node)

    @precondition(lambda self: bool(self.policy.in_flight))
    @rule(data=st.data())
    def failed(self, data: st.DataObject) -> None:
        node = data.draw(st.sampled_from(sorted(self.policy.in_flight)))
        self.policy.ended(node, FAILED, self.now)
        self.gap = PROBE_FIRST
        self.policy.waits(node, self.now)
        self.policy.landed(node)
        self.failed_since[node] = self.now

    @precondition(lambda self: bool(self.policy.in_flight))
    @rule(data=st.data())
    def held_by_the_disk(self, data: st.DataObject) -> None:
        node = data.draw(st.sampled_from(sorted(self.policy.in_flight)))
        state, error = self.policy.state, self.policy.setup_error
        assert not self.policy.ended(node, Outcome(Event.HELD, "OSError: disk full"), self.now)
        assert (self.policy.state, self.policy.setup_error) == (state, error)
        self.policy.waits(node, self.now)
        self.policy.landed(node)
        self.failed_since[node] = self.now  # it waits like a failed node

    @precondition(lambda self: bool(self.policy.in_flight))
    @rule(data=st.data())
    def setup_fails(self, data: st.DataObject) -> None:
        node = data.draw(st.sampled_from(sorted(self.policy.in_flight)))
        due = self.now >= self.probe_due
        before = self.policy.timer(self.now)
        self.policy.ended(node, setup_failed(), self.now)
        self.policy.landed(node)
        assert self.policy.state in (State.PAUSED, State.DRAINING)
        if due:  # a failed probe (or the first call): the gap doubles, up to PROBE_MOST
            self.probe_due = self.now + self.gap
            self.gap = min(self.gap * 2, PROBE_MOST)
        elif before != math.inf and self.policy.state is State.PAUSED:
            assert self.policy.timer(self.now) == before  # a burst's call moves nothing
        if self.policy.state is State.PAUSED:
            wait = self.policy.timer(self.now)
            assert wait == math.inf or math.isclose(wait, self.probe_due - self.now)

    @rule()
    def message(self) -> None:
        self.policy.message()
        self.failed_since.clear()
        self.probe_due = -math.inf

    @rule()
    def wait_begins(self) -> None:
        self.policy.wait_began()

    @precondition(lambda self: self.policy.waited_on)
    @rule()
    def wait_ends(self) -> None:
        self.policy.wait_ended()

    @rule(urgent=st.lists(nodes, max_size=4))
    def prioritize(self, urgent: list[Node]) -> None:
        self.policy.prioritize(urgent)

    @rule(batch=st.lists(st.tuples(st.just(1), st.integers(0, LEAVES // 2 - 1)), max_size=3))
    def batch_waits(self, batch: list[Node]) -> None:
        self.tree.batch = batch

    @rule(grounded=st.booleans())
    def judged(self, grounded: bool) -> None:
        self.policy.judged(grounded)

    @rule()
    def drain(self) -> None:
        self.policy.drain()
        self.drained = True

    @rule(data=st.data())
    def an_end_without_a_call_is_refused(self, data: st.DataObject) -> None:
        node = data.draw(nodes.filter(lambda node: node not in self.policy.in_flight))
        state, waits = self.policy.state, dict(self.policy.failed_at)
        with pytest.raises(RefusedEvent, match="no call in flight"):
            self.policy.ended(node, BUILT, self.now)
        with pytest.raises(RefusedEvent, match="no call in flight"):
            self.policy.waits(node, self.now)
        assert self.policy.state is state and self.policy.failed_at == waits

    # -- laws -----------------------------------------------------------------------------

    def held(self) -> set[Node]:
        return set(self.policy.failed_at) - set(self.failed_since)

    @invariant()
    def paused_exactly_while_the_setup_fails_and_draining_once_drained(self) -> None:
        if self.drained:
            assert self.policy.state is State.DRAINING
        else:
            paused = self.policy.setup_error is not None
            assert self.policy.state is (State.PAUSED if paused else State.RUNNING)

    @invariant()
    def never_more_than_its_slots(self) -> None:
        assert len(self.policy.in_flight) <= self.slots
        assert self.policy.limit == (1 if self.policy.setup_error else self.slots)

    @invariant()
    def a_drained_policy_starts_nothing(self) -> None:
        if self.policy.state is State.DRAINING:
            assert self.policy.can_start(self.tree) == bool(self.policy.in_flight)

    @invariant()
    def timers_are_never_negative(self) -> None:
        assert self.policy.timer(self.now) >= 0

    @invariant()
    def distrust_asks_once(self) -> None:
        distrusted = self.policy.trust is Trust.DISTRUSTED
        assert self.policy.rejections_allowed == (1 if distrusted else MAX_REJECTIONS)


PolicyRuns.TestCase.settings = settings(max_examples=150, stateful_step_count=40, deadline=None)
test_the_policys_laws_hold_over_random_runs = PolicyRuns.TestCase


# -- single laws ---------------------------------------------------------------------------


def test_the_probe_gap_doubles_at_each_failed_probe_up_to_its_cap() -> None:
    policy = Policy(8)
    tree = Tree()
    for node in policy.start(tree, 0.0):  # a burst, all refused by the setup
        policy.ended(node, setup_failed(), 0.0)
        policy.landed(node)
    now = 0.0
    gaps = [policy.timer(now)]
    for _ in range(7):
        assert policy.start(tree, now + gaps[-1] - 0.001) == []  # not before it is due
        now += gaps[-1]
        (probe,) = policy.start(tree, now)  # one call, never a burst
        policy.ended(probe, setup_failed(), now)
        policy.landed(probe)
        gaps.append(policy.timer(now))
    assert gaps == [2.0, 4.0, 8.0, 16.0, 32.0, 60.0, 60.0, 60.0]
    (probe,) = policy.start(tree, now + 60.0)
    assert policy.ended(probe, BUILT, now + 60.0) and policy.state is State.RUNNING
    policy.landed(probe)
    assert len(policy.start(tree, now)) == 8  # every slot again, the held nodes first


def test_a_burst_that_lands_during_a_pause_does_not_grow_the_gap() -> None:
    policy = Policy(4)
    started = policy.start(Tree(), 0.0)
    assert len(started) == 4
    for node in started:
        policy.ended(node, setup_failed(), 1.0)
        policy.landed(node)
    assert policy.timer(1.0) == PROBE_FIRST


def test_a_failed_node_waits_for_a_message_or_its_retry_while_someone_waits() -> None:
    policy = Policy(1)
    tree = Tree()
    (node,) = policy.start(tree, 0.0)
    policy.ended(node, FAILED, 0.0)
    policy.waits(node, 0.0)
    policy.landed(node)
    assert policy.start(tree, 100.0) == [(0, 1)]  # no one waits: the next leaf, not it
    policy.landed((0, 1))
    tree.built.add((0, 1))
    policy.wait_began()
    assert policy.timer(0.0) == RETRY_SECONDS
    assert policy.start(tree, RETRY_SECONDS) == [node]


@given(st.lists(st.booleans(), max_size=60))
def test_trust_is_lost_at_a_full_window_of_rejections_and_won_back_below_the_margin(
    verdicts: list[bool],
) -> None:
    policy = Policy(8)
    latest: list[bool] = []
    for grounded in verdicts:
        before = policy.trust
        changed = policy.judged(grounded)
        latest = [*latest, grounded][-TRUST_WINDOW:]
        rejected = latest.count(False)
        assert policy.rejected_of_latest == rejected
        if len(latest) == TRUST_WINDOW and rejected >= DISTRUST_AT:
            assert policy.trust is Trust.DISTRUSTED
        elif rejected < TRUST_AGAIN_BELOW:
            assert policy.trust is Trust.TRUSTED
        else:  # between the two marks trust stays as it was
            assert policy.trust is before
        assert changed is (None if policy.trust is before else policy.trust)


def test_urgent_nodes_go_first_once_ready() -> None:
    policy = Policy(2)
    tree = Tree()
    policy.prioritize([(1, 0), (0, 5)])  # the merge is not ready: both halves unbuilt
    assert policy.start(tree, 0.0) == [(0, 5), (0, 0)]
