"""The compactor's policy (SPEC §4.1, §4.5, §4.8), as a pure state machine: no I/O, no clock.

It decides which nodes start and when: the slots, the order of the work, a failed node's wait,
the pause of a setup that fails and its probes, and whether the model's lines are trusted. The
service (`service.py`) tells it what happened (a call started, got through, failed or was held
by the setup; a message came; someone waits) with the time as a number, and does what it says.
What is ready to build comes from the memory core, through `Work`.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Iterable, Mapping, Sequence, Set
from enum import Enum
from types import MappingProxyType
from typing import Protocol

from evertalk.compactor.line import MAX_REJECTIONS
from evertalk.memory.nodes import Node
from evertalk.providers.base import ProviderError

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
    ended: `got_through` (the model answered, whatever the line), `failed` (the node waits for
    a message, or RETRY_SECONDS while someone waits), `paused` (the setup is at fault: the node
    is held and not counted), `judged` (a line checked against its input).
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
        self._draining = False
        self._verdicts: deque[bool] = deque(maxlen=TRUST_WINDOW)  # each judged line: true?
        self._trust = Trust.TRUSTED
        self._reported: set[Node] = set()

    # -- what it says ---------------------------------------------------------------------

    @property
    def state(self) -> State:
        if self._draining:
            return State.DRAINING
        return State.PAUSED if self._setup_error is not None else State.RUNNING

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
        self._draining = True

    # -- starting -------------------------------------------------------------------------

    def start(self, work: Work, now: float) -> list[Node]:
        """The nodes to start now, each in flight from here on; none while draining, none
        while paused until the probe is due, and never more than the free slots."""
        if self._draining:
            return []
        if self._setup_error is not None and now < self._probe_at:
            return []
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
            self._in_flight.add(node)
            started.append(node)
        return started

    def can_start(self, work: Work) -> bool:
        """Whether a call runs or one could start now (a paused setup's probe is none)."""
        if self._in_flight:
            return True
        if self._draining or self._setup_error is not None:
            return False
        return self._next(work, work.batch_parents()) is not None

    def timer(self, now: float) -> float:
        """Seconds until time alone may let a call start: the next probe of a paused setup,
        or a failed node's retry while someone waits. Asked right after `start`: when no slot
        is free, or nothing is due at a time, inf (only an event moves things then)."""
        if self._draining or len(self._in_flight) >= self.limit:
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

    def got_through(self) -> bool:
        """A call reached the model: the pause, if any, is over. Whether it held nodes that
        may now go on."""
        released = bool(self._held)
        for node in self._held:
            self._failed_at.pop(node, None)
        self._held.clear()
        self._setup_error = None
        self._probe_gap = PROBE_FIRST
        return released

    def failed(self, node: Node, now: float) -> None:
        """The node got no line and is not built: it waits for the next message (or, while
        someone waits, RETRY_SECONDS)."""
        self._failed_at[node] = now

    def paused(self, node: Node, now: float, error: ProviderError) -> None:
        """The setup is at fault (`error`): the node is held, not counted, and one call at a
        time probes. The probe's gap doubles only when it is due (a failed probe, or the first
        call), not at each call of a burst that was already in flight."""
        self._setup_error = error
        self._failed_at[node] = now
        self._held.add(node)
        if now >= self._probe_at:
            self._probe_at = now + self._probe_gap
            self._probe_gap = min(self._probe_gap * 2, PROBE_MOST)

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
