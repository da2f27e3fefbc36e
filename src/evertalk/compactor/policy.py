"""The compactor's policy (SPEC §4.1, §4.5, §4.8), as a pure state machine: no I/O, no clock.

It decides which nodes start and when: the slots, the order of the work, a failed node's wait,
the pause of a setup that fails and its probes, and whether the model's lines are trusted. It
also says whose fault a call's error is (`classify`). The service (`service.py`) makes the call,
tells it how the call ended (an `Event`) with the time as a number, and does what it says.
Its state moves only as TRANSITIONS allows; an event its state does not take is refused
(`RefusedEvent`), never silently absorbed. What is ready to build comes from the memory core,
through `Work`.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Mapping, Sequence, Set
from dataclasses import dataclass
from enum import Enum
from types import MappingProxyType
from typing import Protocol

from evertalk.compactor.errors import RefusedLocally, TooLong, UnusableReply
from evertalk.compactor.line import MAX_REJECTIONS
from evertalk.memory.nodes import Node, node_name
from evertalk.providers.base import ProviderError
from evertalk.store.errors import StoreError

RETRY_SECONDS = 10.0
"""While someone waits, a failed node is tried again this long after its failure (SPEC §4.5)."""

PROBE_FIRST = 2.0
"""Seconds after a setup error before one call probes the setup again without a new message;
the gap doubles at each failed probe, up to PROBE_MOST."""
PROBE_MOST = 60.0

TRUST_WINDOW = 10
"""The compactor's latest lines judged against their input (SPEC §4.8) that say whether its
model can be trusted to summarize."""

DISTRUST_AT = 8
"""Rejected lines among the latest TRUST_WINDOW that make the model untrusted: each node is then
asked once, and cut from its input when its line is rejected, rather than asked up to six times
(a follow-up for each of two rejections, three failures). A model that invents nearly every
time wastes minutes a call on a local server, and its node ends cut all the same."""

TRUST_AGAIN_BELOW = 5
"""An untrusted model is trusted again once fewer of the latest TRUST_WINDOW lines than this
were rejected: a margin below DISTRUST_AT, so that a lucky line or two does not flip it back
and forth (a small model measured at 89% rejected did, at 8 of 10 both ways)."""


class State(Enum):
    """Whether calls may start."""

    RUNNING = "running"  # a call starts whenever a slot is free and a node is ready
    PAUSED = "paused"  # the setup fails: one call at a time probes it, when the probe is due
    DRAINING = "draining"  # the process is about to exit: no call starts again


class Trust(Enum):
    """Whether the model's lines are mostly true to their input (SPEC §4.8)."""

    TRUSTED = "trusted"  # a node's line may be asked for again after a rejection
    DISTRUSTED = "distrusted"  # asked once; a rejected line cuts the node from its input


class Event(Enum):
    """What the service tells the policy that TRANSITIONS governs: a message, the drain, a call
    that starts, and how a call ended (`classify`)."""

    MESSAGE = "message"  # a new message: failed nodes may go again, a pause is probed
    DRAIN = "drain"  # the process is about to exit
    START = "start"  # a call starts while running
    PROBE = "probe"  # the one call that tries a paused setup
    BUILT = "built"  # the model gave a line
    REJECTED = "rejected"  # an untrusted model's line failed the check: the node is cut
    FAILED = "failed"  # the node's own trouble: counted (SPEC §4.5)
    TOO_LONG = "too long"  # its task cannot fit the window: cut, and no call was made
    SETUP_FAILED = "setup failed"  # the setup's fault (a key, a model, an unreached server)
    HELD = "held"  # the disk or the chat could not take it: not counted, not the setup's


TRANSITIONS: Mapping[tuple[State, Event], State] = MappingProxyType(
    {
        (State.RUNNING, Event.MESSAGE): State.RUNNING,
        (State.RUNNING, Event.DRAIN): State.DRAINING,
        (State.RUNNING, Event.START): State.RUNNING,
        (State.RUNNING, Event.BUILT): State.RUNNING,
        (State.RUNNING, Event.REJECTED): State.RUNNING,
        (State.RUNNING, Event.FAILED): State.RUNNING,
        (State.RUNNING, Event.TOO_LONG): State.RUNNING,
        (State.RUNNING, Event.SETUP_FAILED): State.PAUSED,
        (State.RUNNING, Event.HELD): State.RUNNING,
        # paused: one call probes; any call that reached the model ends the pause
        (State.PAUSED, Event.MESSAGE): State.PAUSED,
        (State.PAUSED, Event.DRAIN): State.DRAINING,
        (State.PAUSED, Event.PROBE): State.PAUSED,
        (State.PAUSED, Event.BUILT): State.RUNNING,
        (State.PAUSED, Event.REJECTED): State.RUNNING,
        (State.PAUSED, Event.FAILED): State.RUNNING,
        (State.PAUSED, Event.TOO_LONG): State.PAUSED,
        (State.PAUSED, Event.SETUP_FAILED): State.PAUSED,
        (State.PAUSED, Event.HELD): State.PAUSED,
        # draining: nothing starts, the calls in flight land; a stop drains again after it
        # cancels what did not land
        (State.DRAINING, Event.MESSAGE): State.DRAINING,
        (State.DRAINING, Event.DRAIN): State.DRAINING,
        (State.DRAINING, Event.BUILT): State.DRAINING,
        (State.DRAINING, Event.REJECTED): State.DRAINING,
        (State.DRAINING, Event.FAILED): State.DRAINING,
        (State.DRAINING, Event.TOO_LONG): State.DRAINING,
        (State.DRAINING, Event.SETUP_FAILED): State.DRAINING,
        (State.DRAINING, Event.HELD): State.DRAINING,
    }
)
"""The state each event leads to; a pair not here is refused: a call starting while paused
(only a probe may), a probe while running, and any call while draining."""

GOT_THROUGH = frozenset({Event.BUILT, Event.REJECTED, Event.FAILED})
"""The ends of a call that reached the model (or failed on the node's own account): the
setup works."""


class RefusedEvent(Exception):
    """The policy was told something its state does not allow: a bug of the service's."""

    def __init__(self, what: str) -> None:
        super().__init__(f"the compactor's policy refused {what}")


def next_state(state: State, event: Event) -> State:
    """The state `event` leads to from `state`; RefusedEvent when TRANSITIONS has no such pair."""
    try:
        return TRANSITIONS[state, event]
    except KeyError:
        raise RefusedEvent(f"the event {event.value!r} while {state.value}") from None


# -- whose fault an error is -------------------------------------------------------------------

SETUP_ERRORS = frozenset({"auth", "not_found"})
"""A wrong key or an unknown model is the setup's fault, not the node's: counting it as a
failure would cut every node after three tries. Such errors pause the work instead, and so does
a server that cannot be reached at all (`unreached`)."""


@dataclass(frozen=True)
class Outcome:
    """How a node's call ended: the event, the reason the user is told of a failure, and the
    error that pauses the setup (SETUP_FAILED only)."""

    event: Event
    reason: str = ""
    error: ProviderError | None = None


BUILT = Outcome(Event.BUILT)


def unreached(error: ProviderError) -> bool:
    """Whether no connection to the model's server was made at all (nothing listens there, no
    route, no such host): no request went out, so no node is at fault. A connection that broke
    after it was made is not this: a server that falls over on one node's input must not stop
    every summary, and the node's third failure cuts it."""
    return error.kind == "connection" and not error.transient


def refused_locally(error: ProviderError, answered: bool) -> bool:
    """Whether an error came from the adapter itself, before any request went out: no HTTP
    status, nothing received, and a kind that blames the request (not the connection)."""
    return error.kind == "bad_request" and error.status is None and not answered


def held(error: Exception) -> Outcome:
    """The disk or the chat could not take the node (reading its input, storing its line): the
    node waits for the next message like a failure, but is not counted."""
    return Outcome(Event.HELD, f"{type(error).__name__}: {error}")


def classify(error: Exception, trust: Trust, deadline: float) -> Outcome:
    """How a call that raised `error` ended (SPEC §4.5). Only the node's own trouble is its
    failure: the model's error, an unusable reply, a bug in handling it. The setup's fault
    pauses the work, the disk's holds the node, and a task too long for the window is cut at
    once; none would be any better for a smaller input. `deadline`: the call's, in seconds."""
    if isinstance(error, TooLong):
        return Outcome(Event.TOO_LONG)
    if isinstance(error, RefusedLocally):
        return Outcome(Event.SETUP_FAILED, str(error.error), error.error)
    if isinstance(error, ProviderError):
        if error.kind in SETUP_ERRORS or unreached(error):
            return Outcome(Event.SETUP_FAILED, str(error), error)
        return Outcome(Event.FAILED, str(error) or error.kind)
    if isinstance(error, TimeoutError):  # an OSError, but the deadline's: before the disk's
        return Outcome(Event.FAILED, f"no reply within the {deadline:g}-second deadline")
    if isinstance(error, OSError | StoreError):
        return held(error)
    if isinstance(error, UnusableReply):
        if error.rejected and trust is Trust.DISTRUSTED:
            return Outcome(Event.REJECTED, str(error))  # asked once, then cut (SPEC §4.8)
        return Outcome(Event.FAILED, str(error))
    return Outcome(Event.FAILED, f"{type(error).__name__}: {error}")  # a bug of ours


class Work(Protocol):
    """What may be built now, as the memory core's queues say (SPEC §4.1)."""

    def ready_leaves(self) -> Sequence[int]:
        """The leaves that may start, oldest first (the first 8 unbuilt ones)."""
        ...

    def batch_parents(self) -> Sequence[Node]:
        """The parents an unfinished batch waits for, most due first."""
        ...

    def first_merge(self, skip: Set[Node]) -> Node | None:
        """The lowest, oldest ready merge not in `skip`."""
        ...

    def may_build(self, node: Node) -> bool:
        """Whether the node exists, is unbuilt, and has both halves built."""
        ...


class Policy:
    """What the compactor starts, and when. Feed it events; ask it `start`, `timer`.

    A node is in flight from `start` to `landed`; in between, the service reports how its call
    ended (`ended`, with the `Outcome` that `classify` gives), that a node it could not build
    waits (`waits`: for a message, or RETRY_SECONDS while someone waits), and each line checked
    against its input (`judged`).
    """

    def __init__(self, concurrency: int) -> None:
        self.concurrency = concurrency
        self._in_flight: set[Node] = set()
        self._failed_at: dict[Node, float] = {}
        self._held: set[Node] = set()  # of `_failed_at`: paused, not failed (a probe may take one)
        self._urgent: list[Node] = []
        self._waiters = 0
        self._setup_error: ProviderError | None = None
        self._probe_at = -math.inf  # while paused: no probe before this time
        self._probe_gap = PROBE_FIRST
        self._state = State.RUNNING
        self._verdicts: deque[bool] = deque(maxlen=TRUST_WINDOW)  # each judged line: true?
        self._trust = Trust.TRUSTED
        self._reported: set[Node] = set()

    # -- what it says ---------------------------------------------------------------------

    @property
    def state(self) -> State:
        return self._state

    @property
    def trust(self) -> Trust:
        return self._trust

    @property
    def setup_error(self) -> ProviderError | None:
        """Why the setup is paused (it outlives a drain), or None."""
        return self._setup_error

    @property
    def in_flight(self) -> frozenset[Node]:
        return frozenset(self._in_flight)

    @property
    def failed_at(self) -> Mapping[Node, float]:
        """The nodes that wait, failed or held by a pause, and since when."""
        return MappingProxyType(self._failed_at)

    @property
    def waited_on(self) -> bool:
        """Whether someone waits for summaries: failed nodes then retry on a timer."""
        return self._waiters > 0

    @property
    def limit(self) -> int:
        """Calls that may be in flight at once: one, a probe, while the setup fails."""
        return 1 if self._setup_error is not None else self.concurrency

    @property
    def rejections_allowed(self) -> int:
        """Lines not true to their input that end a node's size loop."""
        return 1 if self._trust is Trust.DISTRUSTED else MAX_REJECTIONS

    @property
    def rejected_of_latest(self) -> int:
        """Rejected lines among the latest TRUST_WINDOW judged."""
        return self._verdicts.count(False)

    # -- what the outside tells it --------------------------------------------------------

    def message(self) -> None:
        """A new message: every failed node may go again, and a paused setup is probed now."""
        self._step(Event.MESSAGE)
        self._failed_at.clear()
        self._held.clear()
        self._probe_at = -math.inf

    def wait_began(self) -> None:
        self._waiters += 1

    def wait_ended(self) -> None:
        self._waiters -= 1

    def prioritize(self, nodes: Iterable[Node]) -> None:
        """The nodes a waiting turn needs go first (SPEC §4.1)."""
        self._urgent = list(nodes)

    def drain(self) -> None:
        """No call starts from now on."""
        self._step(Event.DRAIN)

    # -- starting -------------------------------------------------------------------------

    def start(self, work: Work, now: float) -> list[Node]:
        """The nodes to start now, each in flight from here on; none while draining, none
        while paused until the probe is due, and never more than the free slots."""
        if self._state is State.DRAINING:
            return []
        if self._state is State.PAUSED and now < self._probe_at:
            return []
        event = Event.PROBE if self._state is State.PAUSED else Event.START
        limit = self.limit
        if len(self._in_flight) >= limit:
            return []
        self._release_due(now)
        # nothing is built while slots are filled: one walk of the views serves them all
        batch = work.batch_parents()
        started: list[Node] = []
        while len(self._in_flight) < limit:
            node = self._next(work, batch)
            if node is None:
                break
            self._failed_at.pop(node, None)  # a probe takes a node held by the pause
            self._held.discard(node)
            self._step(event)
            self._in_flight.add(node)
            started.append(node)
        return started

    def can_start(self, work: Work) -> bool:
        """Whether a call runs or one could start now (a paused setup's probe is none)."""
        if self._in_flight:
            return True
        if self._state is not State.RUNNING:
            return False
        return self._next(work, work.batch_parents()) is not None

    def timer(self, now: float) -> float:
        """Seconds until time alone may let a call start: the next probe of a paused setup,
        or a failed node's retry while someone waits. Asked right after `start`: when no slot
        is free, or nothing is due at a time, inf (only an event moves things then)."""
        if self._state is State.DRAINING or len(self._in_flight) >= self.limit:
            return math.inf
        if self._setup_error is not None:  # its failed nodes wait for the probe or a message
            return self._probe_at - now if self._probe_at > now else math.inf
        if not (self.waited_on and self._failed_at):
            return math.inf
        # `start` released the due ones: each left is due in the future
        return max(0.0, min(self._failed_at.values()) + RETRY_SECONDS - now)

    def _release_due(self, now: float) -> None:
        """While someone waits, the failed nodes whose RETRY_SECONDS are over may go again."""
        if not self.waited_on:
            return
        for node, failed in list(self._failed_at.items()):
            if now - failed >= RETRY_SECONDS:
                del self._failed_at[node]
                self._held.discard(node)

    def _next(self, work: Work, batch: Sequence[Node]) -> Node | None:
        """The next node to start, or None. While paused, a probe may take a node the pause
        holds (it is not at fault)."""
        waits = self._failed_at.keys()
        skip = self._in_flight | (waits - self._held if self._setup_error else waits)
        ready = work.ready_leaves()
        for node in self._urgent:
            # urgent nodes go first, but only once ready like any other (SPEC §4.1): a leaf
            # within the first 8 unbuilt ones, a merge with both halves built
            if node in skip or (node[0] == 0 and node[1] not in ready):
                continue
            if work.may_build(node):
                return node
        # a batch that waits for parents goes on only once they are built; the usual order
        # would build every new leaf first, and then the newest pairs' parents
        for node in batch:
            if node not in skip:
                return node
        for index in ready:
            if (0, index) not in skip:
                return (0, index)
        return work.first_merge(skip)

    # -- how a call ended -----------------------------------------------------------------

    def landed(self, node: Node) -> None:
        """The node's call is over, however it ended: its slot is free."""
        self._in_flight.discard(node)

    def ended(self, node: Node, outcome: Outcome, now: float) -> bool:
        """How the node's call ended (`classify`); it stays in flight until `landed`. Whether
        the end of a pause let the nodes it held go on."""
        self._check_in_flight(node, f"the event {outcome.event.value!r}")
        self._step(outcome.event)
        if outcome.event in GOT_THROUGH:
            return self._got_through()
        if outcome.event is Event.SETUP_FAILED:
            assert outcome.error is not None  # `classify` gives each setup failure its error
            self._paused(node, now, outcome.error)
        return False

    def waits(self, node: Node, now: float) -> None:
        """The node's call ended with no line and the node is not built (failed, or held by
        the disk): it waits for the next message (or, while someone waits, RETRY_SECONDS)."""
        self._check_in_flight(node, "a wait")
        self._failed_at[node] = now

    def _got_through(self) -> bool:
        """A call reached the model: the pause, if any, is over. Whether it held nodes that
        may now go on."""
        released = bool(self._held)
        for node in self._held:
            self._failed_at.pop(node, None)
        self._held.clear()
        self._setup_error = None
        self._probe_gap = PROBE_FIRST
        return released

    def _paused(self, node: Node, now: float, error: ProviderError) -> None:
        """The setup is at fault (`error`): the node is held, not counted, and one call at a
        time probes. The probe's gap doubles only when it is due (a failed probe, or the first
        call), not at each call of a burst that was already in flight."""
        self._setup_error = error
        self._failed_at[node] = now
        self._held.add(node)
        if now >= self._probe_at:
            self._probe_at = now + self._probe_gap
            self._probe_gap = min(self._probe_gap * 2, PROBE_MOST)

    def _step(self, event: Event) -> None:
        self._state = next_state(self._state, event)

    def _check_in_flight(self, node: Node, what: str) -> None:
        """How a call ended is told of a node whose call runs, and only then."""
        if node not in self._in_flight:
            raise RefusedEvent(f"{what} of {node_name(node)}: it has no call in flight")

    def first_report(self, node: Node) -> bool:
        """Whether this is the first trouble of the node told to the user (told once)."""
        if node in self._reported:
            return False
        self._reported.add(node)
        return True

    def judged(self, grounded: bool) -> Trust | None:
        """A size loop ended on a line judged against its input; the new trust when it
        changed: lost at DISTRUST_AT rejected of the latest TRUST_WINDOW, won back below
        TRUST_AGAIN_BELOW."""
        before = self._trust
        self._verdicts.append(grounded)
        rejected = self._verdicts.count(False)
        if len(self._verdicts) == TRUST_WINDOW and rejected >= DISTRUST_AT:
            self._trust = Trust.DISTRUSTED
        elif rejected < TRUST_AGAIN_BELOW:
            self._trust = Trust.TRUSTED
        return None if self._trust is before else self._trust
