"""The compactor: an anyio service that builds the nodes the memory core says are ready.

At most `concurrency` calls run at once (SPEC §4.1). Work is taken from the core's queues
in priority order: the nodes a waiting turn needs; while a batch waits for parents (the view or
the cview is shrinking), those parents, most due first; then leaves oldest first, then merges
lower level first. A built line goes to disk before the core hears of it, so a crash never
loses one: a node is either in tree/ or will be built again after a restart.

No request passes the model's context window (SPEC §3.7, `window.py`): the context is cut to fit,
oldest lines first, and a node whose task alone cannot fit is cut from its input, never sent.

Only a node's own trouble counts as its failure (SPEC §4.5): an error of the model call, an
unusable reply (a line not true to its input among them, SPEC §4.8), a bug in handling it. What
is the setup's fault (a refused key, an unknown model, a setting the adapter refuses) pauses the
work instead, and so do a server that cannot be reached at all (a network that is down, a local
model server not started) and a disk that cannot take the line: none may cut a node, since none
would be any better for a smaller input.

It never polls: when nothing can start (every slot taken, failed nodes waiting for a message,
a paused setup between probes), it sleeps until a message, a call that lands, a failed node's
retry while someone waits, or the next probe.

On a server that serves one request at a time, turns go first (`providers/lane.py`): a call
waits while a turn's call streams, and one a turn's call cut short is sent again once the turn's
calls are over, neither counted as a failure.
"""

from __future__ import annotations

import contextlib
import math
import os
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass

import anyio
from anyio.abc import TaskGroup

from evertalk.chat import Chat, broken_error
from evertalk.compactor.grounding import MIN_SHARED, source_of
from evertalk.compactor.line import MAX_REJECTIONS, Done, FollowUp, SizeLoop, Unusable
from evertalk.compactor.status import CompactorStatus, write_status
from evertalk.compactor.tasks import leaf_task, merge_task
from evertalk.compactor.window import (
    REPLY_TOKENS,
    context_room,
    estimate,
    newest_that_fit,
    output_cap,
    thinks,
)
from evertalk.config import redact
from evertalk.ledger import Ledger
from evertalk.memory import Node, node_name
from evertalk.memory.nodes import first, last
from evertalk.memory.text import leaf_input
from evertalk.memory.view import render, render_lines
from evertalk.providers.base import (
    Finished,
    Provider,
    ProviderError,
    Request,
    Retrying,
    Thinking,
    Tool,
    Usage,
)
from evertalk.providers.lane import TurnLane, Yielded
from evertalk.providers.layout import compaction_request
from evertalk.providers.prices import cost as price_of
from evertalk.store.errors import StoreError

RETRY_SECONDS = 10.0  # while a turn waits, a failed node is tried again this long after (§4.5)
PUBLISH_SECONDS = 1.0  # compactor.json is written at most this often, and at most this late
RATE_AFTER = 8  # summaries built before a rate is given: the first ones start and land together

# A wrong key or an unknown model is the setup's fault, not the node's: counting it as a
# failure would cut every node after three tries. Such errors pause the node instead, and so
# does a server that cannot be reached at all (`unreached`).
SETUP_ERRORS = frozenset({"auth", "not_found"})
PROBE_FIRST = 2.0
"""Seconds after a setup error before one call probes the setup again without a new message;
the gap doubles at each failed probe, up to PROBE_MOST."""
PROBE_MOST = 60.0

Warn = Callable[[str], None]
"""Takes one line for the user, such as `memory: 12+1 could not be summarized (…); …`."""


class UnusableReply(Exception):
    """No try of the size loop gave a usable line (SPEC §4.4 step 5, §4.8). `rejected`: its
    last line was not true to its input."""

    def __init__(self, message: str, rejected: bool = False) -> None:
        super().__init__(message)
        self.rejected = rejected


class TooLong(Exception):
    """The node's task alone (its input) does not fit the model's context window: no call could
    build it, and no retry would change that."""


class RefusedLocally(Exception):
    """The adapter refused the request before sending it (a setting it does not accept): the
    settings are at fault, not the node. Carries the adapter's error."""

    def __init__(self, error: ProviderError) -> None:
        super().__init__(str(error))
        self.error = error


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


def stored(end: Done | Unusable) -> str:
    """The line to store at the end of a size loop; UnusableReply when no try gave one."""
    if isinstance(end, Done):
        return end.line
    if end.rejected is not None:
        why = f"the model's line was not true to its input ({end.rejected})"
        raise UnusableReply(why, rejected=True)
    raise UnusableReply("the model gave no usable line")


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


def _no_budget_pause() -> str | None:
    """No daily budget: the compactor never pauses for one."""
    return None


@dataclass(frozen=True)
class CompactorSettings:
    """Read afresh for every request: replacing `Compactor.settings` changes the model and
    effort from the next call on (`Agent.use_memory_model`)."""

    model: str
    effort: str | None = "high"
    concurrency: int = 8
    deadline: float = 600.0
    max_tokens: int = REPLY_TOKENS  # the reply's cap; room for thoughts is added (`window.py`)
    cache_key: str | None = None
    context_window: int = 200_000  # tokens; no request passes it (the current Anthropic models')
    local: bool = False  # a local server: its model gets no room for thoughts of its own
    min_shared: float = MIN_SHARED  # of a line's content words, in its input (SPEC §4.8)


class Compactor:
    def __init__(
        self,
        chat: Chat,
        provider: Provider,
        settings: CompactorSettings,
        *,
        system: str,
        tools: list[Tool],
        ledger: Ledger | None = None,
        clock: Callable[[], float] = time.monotonic,
        on_warning: Warn | None = None,
        secrets: Sequence[str] = (),
        lane: TurnLane | None = None,
    ) -> None:
        self.chat = chat
        self.lane = lane  # turns go first on a server that serves one request at a time
        self.secrets = secrets  # never in a line: a model (or a proxy) may repeat a key
        self.provider = provider
        self.settings = settings
        self.system = system
        self.tools = tools
        self.ledger = ledger
        self.clock = clock
        self.on_warning = on_warning  # each node's first failure (SPEC §4.5), a paused setup
        self.in_flight: set[Node] = set()
        self._scopes: dict[Node, anyio.CancelScope] = {}  # of the calls in flight
        self.failed_at: dict[Node, float] = {}
        self._held: set[Node] = set()  # of `failed_at`: paused, not failed (a probe may take one)
        self.urgent: list[Node] = []
        self._waiters = 0  # open `waiting()` scopes: failed nodes retry on a timer meanwhile
        self.last_error: str | None = None
        self.setup_error: ProviderError | None = None
        self._probe_at = -math.inf  # after a setup error: no probe before this time
        self._probe_gap = PROBE_FIRST
        self.calls = 0
        self.built = 0
        self.rejected = 0  # replies whose line was not true to its input (SPEC §4.8)
        self.cost = 0.0
        self._wake = anyio.Event()
        self._landed = anyio.Event()  # set (and replaced) each time a call ends
        self._draining = False
        self._status_at = -math.inf
        self._published: CompactorStatus | None = None
        self._warned: set[Node] = set()
        self._until_built = False
        self._busy = 0.0  # seconds of the clock with a call in flight, up to `_busy_since`
        self._busy_since: float | None = None  # since when, while calls are in flight
        self._measured = (0, 0.0)  # (summaries built, busy seconds) at the latest landing
        self._verdicts: deque[bool] = deque(maxlen=TRUST_WINDOW)  # each judged line: true?
        self.untrusted = False  # its model's lines keep failing the check (see `_judged`)
        self.rounds = 0  # times the run loop went round: a loop that never sleeps shows here
        # the daily budget (`budget.py`): why no call may start today, or None
        self.budget_pause: Callable[[], str | None] = _no_budget_pause
        self.budget_paused: str | None = None

    # -- what the outside tells the service -----------------------------------------------

    def message_logged(self) -> None:
        """A new message: every failed node may be tried again (SPEC §4.5), and a paused
        setup probed at once."""
        self.failed_at.clear()
        self._held.clear()
        self._probe_at = -math.inf
        self.wake()

    def wake(self) -> None:
        self._wake.set()

    @contextlib.contextmanager
    def waiting(self) -> Iterator[None]:
        """A scope in which someone waits for summaries (a turn, a `memory compact` client):
        while any is open, a failed node is tried again RETRY_SECONDS after its failure (SPEC
        §4.5). Counted, since the waits begin and end independently: one that ends must not
        take the timer from another."""
        self._waiters += 1
        self.wake()  # asleep until a message, it now times the retry of failed nodes
        try:
            yield
        finally:
            self._waiters -= 1

    @property
    def waited_on(self) -> bool:
        """Whether a `waiting()` scope is open."""
        return self._waiters > 0

    def prioritize(self, nodes: Iterable[Node]) -> None:
        """The nodes a waiting turn needs go first (SPEC §4.1)."""
        self.urgent = list(nodes)
        self.wake()

    def cancel_in_flight(self) -> list[Node]:
        """Cancel every call in flight, at once, its node not counted as failed: a forget is
        about to change the chat (SPEC §12), and a line made from the old text must never be
        stored. Returns the nodes, which are sent again once the chat is opened again."""
        for scope in self._scopes.values():
            scope.cancel()
        return list(self._scopes)

    async def drain(self) -> None:
        """Start no new call from now on, and return once every call in flight has ended: its
        line built, or its failure counted. A process about to exit drains first, since a call
        it cut off would be paid for, its line lost, and its node sent again by the next run.
        From the call on (before its first await), `in_flight` is the whole wait."""
        self._draining = True
        while self.in_flight:
            await self._landed.wait()

    # -- state ----------------------------------------------------------------------------

    def unbuilt(self) -> int:
        return self.chat.core.tree.unbuilt_count()

    def rate(self) -> float | None:
        """Summaries built per second of the time with calls in flight (idle time, waiting for
        messages, does not count), as of the latest call to land: it moves only when one does,
        so the status file is not rewritten for it while a slow call runs. None before
        RATE_AFTER summaries, or with no time measured."""
        built, busy = self._measured
        if built < RATE_AFTER or busy <= 0:
            return None
        return round(built / busy, 4)

    def _judged(self, grounded: bool) -> None:
        """A size loop ended on a line judged against its input; say when trust changes: lost
        at DISTRUST_AT rejected of the latest TRUST_WINDOW, won back below TRUST_AGAIN_BELOW."""
        before = self.untrusted
        self._verdicts.append(grounded)
        rejected = self._verdicts.count(False)
        if len(self._verdicts) == TRUST_WINDOW and rejected >= DISTRUST_AT:
            self.untrusted = True
        elif rejected < TRUST_AGAIN_BELOW:
            self.untrusted = False
        if self.untrusted and not before:
            self._warn(
                f"memory: the compactor model's lines failed the check against their input "
                f"{self._verdicts.count(False)} times of the latest {TRUST_WINDOW}: each node "
                "is now asked once and cut from its input (a true excerpt) when its line "
                "fails; a stronger [memory] model would summarize them"
            )
        elif before and not self.untrusted:
            self._warn("memory: the compactor model's lines pass the check again")

    def status(self) -> CompactorStatus:
        core = self.chat.core
        # every node that will need a model call: all unbuilt leaves (free ones are built at
        # their append), not just the 8 that may start, and the merges whose halves are built
        waiting = core.tree.unbuilt_count(0) + core.queues.merge_count()
        busy = len(self.in_flight | self.failed_at.keys())  # a paused node is briefly both
        return CompactorStatus(
            pid=os.getpid(),
            running=len(self.in_flight),
            queued=max(0, waiting - busy),
            failed=len(self.failed_at),
            last_error=self.last_error,
            calls=self.calls,
            built=self.built,
            cost=round(self.cost, 6),
            rate=self.rate(),
            paused=self.setup_error is not None or self.budget_paused is not None,
        )

    # -- running --------------------------------------------------------------------------

    async def run(self, until_built: bool = False) -> None:
        """Build nodes until cancelled; with `until_built`, until every node is built (or the
        setup fails: a wrong key or model is raised as the ProviderError it is; or the chat
        cannot be written any more: a StoreError)."""
        self._until_built = until_built
        async with anyio.create_task_group() as group:
            while True:
                self.rounds += 1
                self._wake = anyio.Event()
                self._start(group)
                publish_in = self._publish()
                if until_built and not self.in_flight and (self._draining or self._done()):
                    break
                # a status whose write was put off for rate is written when its time comes
                with anyio.move_on_after(min(self._timer(), publish_in)):
                    await self._wake.wait()
            group.cancel_scope.cancel()
        self._publish(force=True)
        if self.setup_error is not None:
            raise self.setup_error
        if self.chat.broken is not None:
            raise broken_error(self.chat.broken)

    def _start(self, group: TaskGroup) -> None:
        if self._stopped() or self._over_budget():
            return
        # after a setup error, one call at a time probes whether the setup works again, at
        # growing intervals until the next message: not every ready node in a burst
        if self.setup_error is not None and self.clock() < self._probe_at:
            return
        limit = self._limit()
        if len(self.in_flight) >= limit:
            return
        self._release_due()
        # nothing is built while slots are filled: one walk of the views serves them all
        batch = self.chat.core.batch_parents()
        while len(self.in_flight) < limit:
            node = self._next(batch)
            if node is None:
                return
            self.failed_at.pop(node, None)  # a probe takes a node held by the pause
            self._held.discard(node)
            if not self.in_flight:
                self._busy_since = self.clock()
            self.in_flight.add(node)
            group.start_soon(self._compact, node)

    def _stopped(self) -> bool:
        """Whether no call may start at all: the chat cannot take a line until a reopen (no
        call is worth paying), or the process drains before it exits."""
        return self.chat.broken is not None or self._draining

    def _over_budget(self) -> bool:
        """Whether the day's spending has reached the compactor's share of the daily budget:
        no call starts until it has not (a new day, a raised budget), looked at each time the
        loop wakes (a message, a call that lands). Said once, as a `memory:` warning."""
        why = self.budget_pause()
        if why is not None and self.budget_paused is None:
            self._warn(why)
        self.budget_paused = why
        return why is not None

    def _limit(self) -> int:
        """Calls that may be in flight at once: one, a probe, while the setup fails."""
        return 1 if self.setup_error is not None else self.settings.concurrency

    def can_start(self) -> bool:
        """Whether a call runs or one could start now: the work that keeps a service from
        exiting when idle (SPEC §11). A paused compactor, leaves behind the leaf window, and
        failed nodes that wait for a message are none."""
        if self.in_flight:
            return True
        if self._stopped() or self.setup_error is not None or self.budget_paused is not None:
            return False
        return self._next(self.chat.core.batch_parents()) is not None

    def _measure(self) -> None:
        """A call landed: the busy time so far, and the rate's basis."""
        now = self.clock()
        if self._busy_since is not None:
            self._busy += now - self._busy_since
            self._busy_since = now if self.in_flight else None
        self._measured = (self.built, self._busy)

    def _done(self) -> bool:
        broken = self.chat.broken is not None or self.budget_paused is not None
        return self.setup_error is not None or broken or self.unbuilt() == 0

    def _release_due(self) -> None:
        """While someone waits, the failed nodes whose RETRY_SECONDS are over may go again."""
        if not self.waited_on:
            return
        now = self.clock()
        for node, failed in list(self.failed_at.items()):
            if now - failed >= RETRY_SECONDS:
                del self.failed_at[node]
                self._held.discard(node)

    def _next(self, batch: list[Node]) -> Node | None:
        """The next node to start, or None; `batch`: the parents an unfinished batch waits
        for. While paused, a probe may take a node the pause holds (it is not at fault)."""
        core = self.chat.core
        waits = self.failed_at.keys() - self._held if self.setup_error else self.failed_at.keys()
        skip = self.in_flight | waits
        ready = core.queues.ready_leaves(core.tree)
        for node in self.urgent:
            # urgent nodes go first, but only once ready like any other (SPEC §4.1): a leaf
            # within the first 8 unbuilt ones, a merge with both halves built
            if node in skip or (node[0] == 0 and node[1] not in ready):
                continue
            if core.pending_error(node) is None:
                return node
        # a batch that waits for parents goes on only once they are built; the usual order
        # would build every new leaf first, and then the newest pairs' parents
        for node in batch:
            if node not in skip:
                return node
        for index in ready:
            if (0, index) not in skip:
                return (0, index)
        return core.queues.first_merge(core.tree, skip)

    def _timer(self) -> float:
        """Seconds until a timer may let a call start: the next probe of a paused setup, or
        the retry of a failed node while someone waits. Called right after `_start`: when
        nothing can start at a timer (no slot is free, a due probe found no node), inf, and only
        a wake (a message, a call that lands, a new wait) moves the loop: it never polls."""
        if self._stopped() or self.budget_paused or len(self.in_flight) >= self._limit():
            return math.inf
        now = self.clock()
        if self.setup_error is not None:  # its failed nodes wait for the probe or a message
            return self._probe_at - now if self._probe_at > now else math.inf
        if not (self.waited_on and self.failed_at):
            return math.inf
        # `_start` released the due ones: each left is due in the future
        return max(0.0, min(self.failed_at.values()) + RETRY_SECONDS - now)

    def _publish(self, force: bool = False) -> float:
        """Write compactor.json if the status changed, at most once per PUBLISH_SECONDS.
        Returns how many seconds until a write put off for rate is due (inf: none is)."""
        status = self.status()
        if status == self._published and not force:
            return math.inf
        now = time.monotonic()
        due = self._status_at + PUBLISH_SECONDS - now
        if due > 0 and not force:
            return due
        self._status_at = now
        self._published = status
        # the status file is a courtesy to other terminals; the chat does not depend on it
        with contextlib.suppress(OSError):
            write_status(self.chat.store.path, status)
        return math.inf

    # -- one node -------------------------------------------------------------------------

    async def _compact(self, node: Node) -> None:
        try:
            with anyio.CancelScope() as scope:  # `cancel_in_flight` ends it, quietly
                self._scopes[node] = scope
                await self._attempt(node)
        except Exception as error:  # the disk (or the chat) could not take it: not the node's
            # fault, so it is not counted; the node waits for the next message like a failure
            self._report(node, f"{type(error).__name__}: {error}")
            self.failed_at[node] = self.clock()
        finally:
            self._scopes.pop(node, None)
            self.in_flight.discard(node)
            self._measure()
            landed, self._landed = self._landed, anyio.Event()
            landed.set()
            self.wake()

    async def _attempt(self, node: Node) -> None:
        try:
            line = await self._summarize(node)
        except TooLong:
            self._cut(node)
        except RefusedLocally as refused:
            self._pause(node, refused.error)
        except ProviderError as error:
            if error.kind in SETUP_ERRORS or unreached(error):
                self._pause(node, error)
            else:
                self._fail(node, str(error) or error.kind)
        except TimeoutError:  # an OSError, but the deadline's: caught before the disk's
            self._fail(node, f"no reply within the {self.settings.deadline:g}-second deadline")
        except (OSError, StoreError):
            raise  # reading the message or a line failed: `_compact` holds the node
        except UnusableReply as error:
            if error.rejected and self.untrusted:
                self._setup_works()
                self.chat.cut(node)
            else:
                self._fail(node, str(error))
        except Exception as error:  # a bug in making the request or reading the reply
            self._fail(node, f"{type(error).__name__}: {error}")
        else:
            self._setup_works()
            self.chat.build(node, redact(line, self.secrets))
            self.built += 1

    def _pause(self, node: Node, error: ProviderError) -> None:
        """A setup error: the node waits and is not counted; one call at a time probes."""
        if self.setup_error is None and not self._until_built:
            # `memory compact` raises it; in a session, this is the only word of it
            how = "reached" if unreached(error) else "used"
            self._warn(
                f"memory: summaries are paused: the compactor's model cannot be {how} "
                f"({error}); they go on once it can"
            )
        self.setup_error = error
        self.last_error = str(error)
        now = self.clock()
        self.failed_at[node] = now
        self._held.add(node)
        if now >= self._probe_at:  # a probe failed, or the first call: not each of a burst
            self._probe_at = now + self._probe_gap
            self._probe_gap = min(self._probe_gap * 2, PROBE_MOST)

    def _setup_works(self) -> None:
        """A call got through: the nodes the pause held go on."""
        if self._held:
            for node in self._held:
                self.failed_at.pop(node, None)
            self._held.clear()
            self.wake()
        self.setup_error = None
        self._probe_gap = PROBE_FIRST

    def _cut(self, node: Node) -> None:
        """Build a node whose task does not fit the window from its cut input (SPEC §2.5)."""
        self.chat.cut(node)
        self._warn(
            f"memory: {node_name(node)} is too long for the compactor model's window "
            f"({self.settings.context_window:,} tokens); its line is its first 512 bytes"
        )

    def _fail(self, node: Node, reason: str) -> None:
        self._setup_works()  # a call got through to the model
        self._report(node, reason)
        self.chat.fail(node)
        if not self.chat.core.tree.is_built(node):  # the third failure built it cut
            self.failed_at[node] = self.clock()

    def _report(self, node: Node, reason: str) -> None:
        """The latest error for the status; a warning at the node's first failure only."""
        reason = " ".join(reason.split()) or "unknown error"
        self.last_error = f"{node_name(node)}: {reason}"
        if node not in self._warned:
            self._warned.add(node)
            self._warn(
                f"memory: {node_name(node)} could not be summarized ({reason}); "
                "it will be tried again"
            )

    def _warn(self, line: str) -> None:
        if self.on_warning is not None:
            # a warning that cannot be shown must not change what happens to the node
            with contextlib.suppress(Exception):
                self.on_warning(line)

    async def _summarize(self, node: Node) -> str:
        if self.lane is not None:
            await self.lane.wait_clear()  # the context is taken when the call can start
        task, inputs = self._task(node)
        context, finer = self._context(node, task, self.settings)
        # a merge may also draw on the finer lines of its own range (its task says so)
        tries = 1 if self.untrusted else MAX_REJECTIONS
        loop = SizeLoop(task, source_of(*inputs, *finer), self.settings.min_shared, tries)
        followups: list[tuple[str, str]] = []
        while True:
            settings = self.settings  # afresh for every request (see CompactorSettings)
            request = self._request(settings, context, loop.first_task, followups)
            if followups and estimate(request) > settings.context_window:
                return stored(loop.stop())  # the over-long line sent back would not fit
            finished, started = await self._call(node, request)
            thinking_only = not finished.text.strip() and any(
                isinstance(part, Thinking) for part in finished.parts
            )
            # checked and sent back as it would be stored: a key the model repeats stays out
            step = loop.take(redact(finished.text, self.secrets), thinking_only)
            if loop.rejected is not None:
                self.rejected += 1
            self._account(node, request, finished.usage, started, rejected=loop.rejected)
            if not isinstance(step, FollowUp):
                if isinstance(step, Done) or step.rejected is not None:
                    self._judged(isinstance(step, Done))
                return stored(step)
            followups.append((step.reply, step.text))

    def _context(self, node: Node, task: str, settings: CompactorSettings) -> tuple[str, list[str]]:
        """The node's context (SPEC §3.7), taken once, rendered, and cut to the newest lines
        that fit the window beside the rest of the request; and the texts of its lines within
        the node's own range. Raises TooLong when the request does not fit even with no
        context."""
        bare = self._request(settings, render([], self.chat.text_of), task, [])
        room = context_room(bare, settings.context_window)
        if room is None:
            raise TooLong
        nodes = self.chat.core.context(node)
        lines = newest_that_fit(list(render_lines(nodes, self.chat.text_of)), room)
        start = first(node)
        kept = nodes[len(nodes) - len(lines) :] if lines else []
        finer = [self.chat.text_of(n) or "" for n in kept if first(n) >= start]
        return "\n".join(["<chat>", *lines, "</chat>"]), finer

    def _request(
        self,
        settings: CompactorSettings,
        context: str,
        task: str,
        followups: list[tuple[str, str]],
    ) -> Request:
        return compaction_request(
            settings.model,
            self.system,
            self.tools,
            context,
            task,
            followups,
            output_cap(
                settings.max_tokens,
                settings.context_window,
                thinks(settings.effort, settings.local),
            ),
            settings.effort,
            settings.cache_key,
        )

    async def _call(self, node: Node, request: Request) -> tuple[Finished, float]:
        """The call's complete reply, and when its last try started; a turn's call that cuts it
        short makes it go again once the turns' calls are over (not a failure)."""
        while True:
            attempt = _Attempt()
            try:
                async with self._turns_first():
                    return await self._send(node, request, attempt), attempt.started
            except Yielded:
                if attempt.answered:  # the server had begun: a call all the same (SPEC §1.8)
                    self._account(node, request, Usage(), attempt.started, failed=True)

    def _turns_first(self) -> contextlib.AbstractAsyncContextManager[None]:
        if self.lane is None:
            return contextlib.nullcontext()
        return self.lane.compaction()

    async def _send(self, node: Node, request: Request, attempt: _Attempt) -> Finished:
        """One call through the provider (and its retries), within the deadline. A failed one
        is accounted for here; a complete one by the caller, once its reply is judged. `attempt`
        tells the caller, should the lane cut the call short, whether it had been answered."""
        attempt.started = time.monotonic()
        try:
            with anyio.fail_after(self.settings.deadline):
                finished: Finished | None = None
                async for event in self.provider.stream(request):
                    if isinstance(event, Retrying):  # a failed try, sent again
                        if event.usage is not None:  # its response had begun: it was billed
                            self._account(node, request, event.usage, attempt.started, failed=True)
                        attempt.answered, attempt.started = False, time.monotonic()
                        continue
                    attempt.answered = True
                    if isinstance(event, Finished):
                        finished = event
                if finished is None:
                    raise ProviderError("cut", "the reply stream ended before it was complete")
        except ProviderError as error:
            if refused_locally(error, attempt.answered):
                raise RefusedLocally(error) from None
            if attempt.answered:  # a cut stream, an error event: a call all the same (SPEC §1.8)
                usage = error.usage or Usage()
                self._account(node, request, usage, attempt.started, failed=True)
            raise
        except TimeoutError:  # the deadline: the request went out and the model worked on it
            self._account(node, request, Usage(), attempt.started, failed=True)
            raise
        return finished

    def _account(
        self,
        node: Node,
        request: Request,
        usage: Usage,
        started: float,
        *,
        failed: bool = False,
        rejected: str | None = None,
    ) -> None:
        """One model call: counted, priced and written to the ledger (with why its reply was
        rejected, when it was not true to its input)."""
        self.calls += 1
        # the request's model, not the settings': they may change while the call runs
        cost = price_of(self.provider.name, request.model, usage)
        self.cost += cost or 0.0
        if self.ledger is not None:
            self.ledger.record(
                role="compaction",
                provider=self.provider.name,
                model=request.model,
                usage=usage,
                cost=cost,
                duration_ms=(time.monotonic() - started) * 1e3,
                node=node_name(node),
                failed=failed,
                rejected=rejected,
            )

    def _task(self, node: Node) -> tuple[str, list[str]]:
        """The node's task, and what its line may draw on: its input, with the ids the task
        names (a line may say which messages it covers)."""
        level, index = node
        if level == 0:
            message = self.chat.store.read_message(index)
            return leaf_task(index, message.kind, message.text), [
                leaf_input(message.kind, message.text),
                str(index),
            ]
        left, right = (level - 1, 2 * index), (level - 1, 2 * index + 1)
        left_text, right_text = self.chat.text_of(left), self.chat.text_of(right)
        assert left_text is not None and right_text is not None
        task = merge_task(left, left_text, right, right_text)
        names = " ".join(node_name(n) for n in (left, right))
        return task, [left_text, right_text, f"{names} {first(node)} {last(node)}"]


@dataclass
class _Attempt:
    """One call as `_send` makes it: when its latest try started, and whether anything of the
    response came (it may be billed from then)."""

    started: float = 0.0
    answered: bool = False
