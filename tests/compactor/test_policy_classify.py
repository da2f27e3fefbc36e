"""Whose fault a failed compaction call is (`policy.classify`, SPEC §4.5), pure: the error a call
raised in, the event out. Only the node's own trouble counts as its failure; the setup's pauses,
the disk's holds the node, and a task too long for the window is cut."""

from __future__ import annotations

from typing import get_args

import pytest
from hypothesis import given
from hypothesis import strategies as st

from evertalk.compactor.errors import RefusedLocally, TooLong, UnusableReply
from evertalk.compactor.policy import (
    GOT_THROUGH,
    Event,
    Outcome,
    Trust,
    classify,
    refused_locally,
    unreached,
)
from evertalk.providers.base import ErrorKind, ProviderError
from evertalk.store.errors import StoreError

DEADLINE = 600.0

REFUSED_KEY = ProviderError("auth", "anthropic: the API key was refused", 401)
NO_MODEL = ProviderError("not_found", "anthropic: no model claude-nope", 404)
NOTHING_LISTENS = ProviderError("connection", "anthropic: could not connect", transient=False)
BOGUS_EFFORT = ProviderError("bad_request", "anthropic: no effort 'bogus' for this model")
BROKE = ProviderError(
    "connection", "anthropic: the connection broke before the reply began", transient=True
)
TOO_ODD = ProviderError("bad_request", "anthropic: too odd", 400)
OVERLOADED = ProviderError("overloaded", "anthropic: overloaded", 529)
SILENT = ProviderError("server", "", 500)


@pytest.mark.parametrize(
    ("error", "expected"),
    [
        # the setup's fault: paused, the error kept for the status and `memory compact`
        (REFUSED_KEY, Outcome(Event.SETUP_FAILED, str(REFUSED_KEY), REFUSED_KEY)),
        (NO_MODEL, Outcome(Event.SETUP_FAILED, str(NO_MODEL), NO_MODEL)),
        (NOTHING_LISTENS, Outcome(Event.SETUP_FAILED, str(NOTHING_LISTENS), NOTHING_LISTENS)),
        (
            RefusedLocally(BOGUS_EFFORT),
            Outcome(Event.SETUP_FAILED, str(BOGUS_EFFORT), BOGUS_EFFORT),
        ),
        # the node's: counted, with the reason the user is told
        (BROKE, Outcome(Event.FAILED, str(BROKE))),
        (TOO_ODD, Outcome(Event.FAILED, "anthropic: too odd")),
        (OVERLOADED, Outcome(Event.FAILED, "anthropic: overloaded")),  # retries spent
        (SILENT, Outcome(Event.FAILED, "server")),  # no message: its kind
        (TimeoutError(), Outcome(Event.FAILED, "no reply within the 600-second deadline")),
        (
            UnusableReply("the model gave no usable line"),
            Outcome(Event.FAILED, "the model gave no usable line"),
        ),
        (KeyError("no such field"), Outcome(Event.FAILED, "KeyError: 'no such field'")),
        # the disk's: held, not counted
        (
            OSError(28, "No space left on device"),
            Outcome(Event.HELD, "OSError: [Errno 28] No space left on device"),
        ),
        (StoreError("disk full"), Outcome(Event.HELD, "StoreError: disk full")),
        # too long for the window: cut at once, no call made
        (TooLong(), Outcome(Event.TOO_LONG)),
    ],
    ids=lambda value: type(value).__name__ if isinstance(value, Exception) else "",
)
@pytest.mark.parametrize("trust", list(Trust), ids=str)
def test_each_error_is_classed_by_whose_fault_it_is(
    error: Exception, expected: Outcome, trust: Trust
) -> None:
    assert classify(error, trust, DEADLINE) == expected


def test_the_deadline_is_said_as_it_was_set() -> None:
    outcome = classify(TimeoutError(), Trust.TRUSTED, 0.5)
    assert outcome == Outcome(Event.FAILED, "no reply within the 0.5-second deadline")


def test_a_rejected_line_fails_a_trusted_model_and_cuts_for_an_untrusted_one() -> None:
    rejected = UnusableReply("the model's line was not true to its input (m1)", rejected=True)
    why = "the model's line was not true to its input (m1)"
    assert classify(rejected, Trust.TRUSTED, DEADLINE) == Outcome(Event.FAILED, why)
    assert classify(rejected, Trust.DISTRUSTED, DEADLINE) == Outcome(Event.REJECTED, why)


def test_a_time_out_is_the_deadlines_not_the_disks() -> None:
    # TimeoutError is an OSError: the disk's branch must not take it
    assert issubclass(TimeoutError, OSError)
    assert classify(TimeoutError(), Trust.TRUSTED, DEADLINE).event is Event.FAILED


statuses = st.none() | st.integers(400, 599)


@given(
    kind=st.sampled_from(get_args(ErrorKind)),
    status=statuses,
    transient=st.none() | st.booleans(),
    trust=st.sampled_from(Trust),
)
def test_a_provider_error_pauses_exactly_when_the_setup_is_at_fault(
    kind: ErrorKind, status: int | None, transient: bool | None, trust: Trust
) -> None:
    error = ProviderError(kind, "the reason", status, transient=transient)
    outcome = classify(error, trust, DEADLINE)
    setup = kind in ("auth", "not_found") or (kind == "connection" and not error.transient)
    assert outcome.event is (Event.SETUP_FAILED if setup else Event.FAILED)
    assert outcome.error is (error if setup else None)
    assert outcome.reason == "the reason"
    assert unreached(error) == (kind == "connection" and not error.transient)


@given(
    kind=st.sampled_from(get_args(ErrorKind)),
    status=statuses,
    answered=st.booleans(),
)
def test_only_a_bad_request_never_sent_is_refused_locally(
    kind: ErrorKind, status: int | None, answered: bool
) -> None:
    error = ProviderError(kind, "the reason", status)
    expected = kind == "bad_request" and status is None and not answered
    assert refused_locally(error, answered) is expected


@pytest.mark.parametrize("trust", list(Trust), ids=str)
def test_an_error_is_never_a_built_node_and_only_a_pause_carries_the_error(trust: Trust) -> None:
    errors: list[Exception] = [
        REFUSED_KEY,
        BROKE,
        TimeoutError(),
        OSError(5, "I/O error"),
        UnusableReply("x", rejected=True),
        TooLong(),
        ValueError("a bug"),
    ]
    ends = set(Event) - {Event.MESSAGE, Event.DRAIN, Event.START, Event.PROBE, Event.BUILT}
    for error in errors:
        outcome = classify(error, trust, DEADLINE)
        assert outcome.event in ends
        assert (outcome.error is not None) == (outcome.event is Event.SETUP_FAILED)
        if outcome.event in GOT_THROUGH | {Event.HELD}:
            assert outcome.reason  # a failure the user is told of has its reason
