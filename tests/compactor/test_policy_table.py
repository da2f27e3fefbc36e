"""The policy's transition table (`compactor/policy.py`): every pair of a state and an event is
in the table or refused, the table says what the pause and the drain mean, and a policy told an
event through its own methods goes where the table says."""

from __future__ import annotations

from itertools import product

import pytest
from test_compactor_policy import FAILED, Tree, setup_failed

from evertalk.compactor.policy import (
    BUILT,
    GOT_THROUGH,
    PROBE_MOST,
    TRANSITIONS,
    Event,
    Outcome,
    Policy,
    RefusedEvent,
    State,
    next_state,
)
from evertalk.memory.nodes import Node

REFUSED = {
    (State.RUNNING, Event.PROBE),  # a running policy starts calls, it probes nothing
    (State.PAUSED, Event.START),  # a paused one starts only its probe
    (State.DRAINING, Event.START),
    (State.DRAINING, Event.PROBE),
}

OUTCOMES = {
    Event.BUILT: BUILT,
    Event.REJECTED: Outcome(Event.REJECTED, "the model's line was not true to its input"),
    Event.FAILED: FAILED,
    Event.TOO_LONG: Outcome(Event.TOO_LONG),
    Event.SETUP_FAILED: setup_failed(),
    Event.HELD: Outcome(Event.HELD, "OSError: [Errno 28] No space left on device"),
}


def law(state: State, event: Event) -> State:
    """Where an allowed event leads, as the pause and the drain are meant: a drain is for
    good; a setup error pauses; a call that reached the model ends a pause; the rest (a
    message, a start or probe, a node too long or held by the disk) keeps the state."""
    if state is State.DRAINING or event is Event.DRAIN:
        return State.DRAINING
    if event is Event.SETUP_FAILED:
        return State.PAUSED
    if event in GOT_THROUGH:
        return State.RUNNING
    return state


@pytest.mark.parametrize(("state", "event"), list(product(State, Event)), ids=str)
def test_every_pair_is_in_the_table_or_refused(state: State, event: Event) -> None:
    if (state, event) in REFUSED:
        assert (state, event) not in TRANSITIONS
        with pytest.raises(RefusedEvent) as refused:
            next_state(state, event)
        assert str(refused.value) == (
            f"the compactor's policy refused the event '{event.value}' while {state.value}"
        )
    else:
        assert next_state(state, event) is TRANSITIONS[state, event] is law(state, event)


def test_the_table_holds_no_pair_but_the_allowed_ones() -> None:
    assert set(TRANSITIONS) == set(product(State, Event)) - REFUSED


def policy_in(state: State) -> tuple[Policy, Node]:
    """A policy of two slots brought to `state` through its methods, with one call in flight:
    its node."""
    policy = Policy(2)
    first, second = policy.start(Tree(), 0.0)
    if state is State.PAUSED:
        policy.ended(first, setup_failed(), 0.0)
        policy.landed(first)
    elif state is State.DRAINING:
        policy.drain()
    assert policy.state is state
    return policy, second


@pytest.mark.parametrize("state", list(State), ids=str)
@pytest.mark.parametrize("event", list(OUTCOMES), ids=str)
def test_a_calls_end_moves_a_policy_as_the_table_says(state: State, event: Event) -> None:
    policy, node = policy_in(state)
    policy.ended(node, OUTCOMES[event], 1.0)
    assert policy.state is TRANSITIONS[state, event]
    assert (policy.setup_error is not None) == (policy.state is State.PAUSED) or (
        state is State.DRAINING
    )


@pytest.mark.parametrize("state", list(State), ids=str)
def test_a_message_and_a_drain_move_a_policy_as_the_table_says(state: State) -> None:
    policy, _ = policy_in(state)
    policy.message()
    after = TRANSITIONS[state, Event.MESSAGE]
    assert policy.state is after
    policy.drain()
    assert policy.state is TRANSITIONS[after, Event.DRAIN] is State.DRAINING
    policy.drain()  # a stop drains again once it has cancelled what did not land
    assert policy.state is State.DRAINING


@pytest.mark.parametrize("state", list(State), ids=str)
def test_a_policy_starts_only_the_calls_its_state_allows(state: State) -> None:
    policy, node = policy_in(state)
    policy.ended(node, OUTCOMES[Event.HELD], 0.0)  # its slot is free, the state as it was
    policy.landed(node)
    free = policy.limit - len(policy.in_flight)  # paused: one, for the probe
    started = policy.start(Tree(), PROBE_MOST)  # any probe is due by then
    if state is State.DRAINING:
        assert started == []
    else:
        assert len(started) == free == 1 and policy.state is state


def test_the_end_of_a_call_not_in_flight_is_refused_in_one_line() -> None:
    policy = Policy(1)
    (node,) = policy.start(Tree(), 0.0)
    policy.ended(node, BUILT, 0.0)
    policy.landed(node)
    with pytest.raises(RefusedEvent) as refused:
        policy.ended(node, FAILED, 0.0)
    assert str(refused.value) == (
        "the compactor's policy refused the event 'failed' of 0+1: it has no call in flight"
    )
    with pytest.raises(RefusedEvent, match=r"refused a wait of 0\+1: it has no call in flight"):
        policy.waits(node, 0.0)
    assert policy.state is State.RUNNING and not policy.failed_at
