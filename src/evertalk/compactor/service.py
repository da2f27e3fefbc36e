"""The compactor: an anyio service that builds the nodes the memory core says are ready.
What starts when (slots, order, failures, the pause and its probes, trust) is decided by the
pure `Policy` of `policy.py`; this module makes the calls, writes the lines, and keeps time.

At most `concurrency` calls run at once (SPEC §4.1). Work is taken from the core's queues
in priority order: the nodes a waiting turn needs; while a batch waits for parents (the view or
the cview is shrinking), those parents, most due first; then leaves oldest first, then merges
lower level first. A built line goes to disk before the core hears of it, so a crash never
loses one: a node is either in tree/ or will be built again after a restart.

No request passes the model's context window (SPEC §3.7, `window.py`): the context is cut to fit,
oldest lines first, and a node whose task alone cannot fit is cut from its input, never sent.

Only a node's own trouble counts as its failure (SPEC §4.5): an error of the model call, an
unusable reply (a line not true to its input among them, SPEC §4.8), a bug in handling it. What
is the setup's fault (a refused key, an unknown model, a setting the adapter refuses, a server
that cannot be reached at all) pauses the work instead, and a disk that cannot take the line
holds the node: none may cut a node, since none would be any better for a smaller input. The
policy says which is which (`policy.classify`); this module does what each asks.

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
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence, Set
from dataclasses import dataclass, replace

import anyio
from anyio.abc import TaskGroup

from evertalk.chat import Chat, broken_error
from evertalk.compactor.errors import RefusedLocally, TooLong, UnusableReply
from evertalk.compactor.grounding import MIN_SHARED, source_of
from evertalk.compactor.line import Done, FollowUp, SizeLoop, Unusable
from evertalk.compactor.policy import (
    BUILT,
    TRUST_WINDOW,
    Event,
    Outcome,
    Policy,
    State,
    Trust,
    classify,
    held,
    refused_locally,
    unreached,
)
from evertalk.compactor.policy import RETRY_SECONDS as RETRY_SECONDS
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
    Thinking,
    Tool,
    Usage,
)
from evertalk.providers.call import Call, Meter
from evertalk.providers.lane import TurnLane, Yielded
from evertalk.providers.layout import compaction_request
from evertalk.store.compactor_status import CompactorStatus, write_status
from evertalk.store.errors import StoreError

PUBLISH_SECONDS = 1.0  # compactor.json is written at most this often, and at most this late
RATE_AFTER = 8  # summaries built before a rate is given: the first ones start and land together

Warn = Callable[[str], None]
"""Takes one line for the user, such as `memory: 12+1 could not be summarized (…); …`."""


def stored(end: Done | Unusable) -> str:
    """The line to store at the end of a size loop; UnusableReply when no try gave one."""
    if isinstance(end, Done):
        return end.line
    if end.rejected is not None:
        why = f"the model's line was not true to its input ({end.rejected})"
        raise UnusableReply(why, rejected=True)
    raise UnusableReply("the model gave no usable line")


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


class CoreWork:
    """What may be built now, from the chat's memory core (the policy's `Work`): read afresh
    each time, since a reopen after a forget brings a new core."""

    def __init__(self, chat: Chat) -> None:
        self.chat = chat

    def ready_leaves(self) -> list[int]:
        return self.chat.ready_leaves()

    def batch_parents(self) -> list[Node]:
        return self.chat.batch_parents()

    def first_merge(self, skip: Set[Node]) -> Node | None:
        return self.chat.first_merge(set(skip))

    def may_build(self, node: Node) -> bool:
        return self.chat.may_build(node)


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
        self.policy = Policy(settings.concurrency)  # what starts when: the pure part
        self.work = CoreWork(chat)
        self.lane = lane  # turns go first on a server that serves one request at a time
        self.secrets = secrets  # never in a line: a model (or a proxy) may repeat a key
        self.provider = provider
        self.settings = settings
        self.system = system
        self.tools = tools
        self.ledger = ledger
        self.clock = clock
        self.on_warning = on_warning  # each node's first failure (SPEC §4.5), a paused setup
        self._scopes: dict[Node, anyio.CancelScope] = {}  # of the calls in flight
        self.last_error: str | None = None
        self.calls = 0
        self.built = 0
        self.rejected = 0  # replies whose line was not true to its input (SPEC §4.8)
        self.cost = 0.0
        self._wake = anyio.Event()
        self._landed = anyio.Event()  # set (and replaced) each time a call ends
        self._status_at = -math.inf
        self._published: CompactorStatus | None = None
        self._until_built = False
        self._busy = 0.0  # seconds of the clock with a call in flight, up to `_busy_since`
        self._busy_since: float | None = None  # since when, while calls are in flight
        self._measured = (0, 0.0)  # (summaries built, busy seconds) at the latest landing
        self.rounds = 0  # times the run loop went round: a loop that never sleeps shows here
        # the daily budget (`budget.py`): why no call may start today, or None
        self.budget_pause: Callable[[], str | None] = _no_budget_pause
        self.budget_paused: str | None = None

    @property
    def settings(self) -> CompactorSettings:
        return self._settings

    @settings.setter
    def settings(self, settings: CompactorSettings) -> None:
        self._settings = settings
        self.policy.concurrency = settings.concurrency

    # -- what the outside tells the service -----------------------------------------------

    def warn_to(self, on_warning: Warn) -> None:
        """Where its warnings go from now on (a session's `memory:` lines)."""
        self.on_warning = on_warning

    def use_tools(self, tools: list[Tool]) -> None:
        """The tools every compaction carries from its next call on: the turns' list, so that
        both keep one cached prefix (SPEC §4.2)."""
        self.tools = tools

    def use_model(self, model: str, effort: str | None) -> None:
        """The model (and effort) of its next call on; the calls in flight keep theirs."""
        self.settings = replace(self.settings, model=model, effort=effort)

    def follow_budget(self, pause: Callable[[], str | None]) -> None:
        """`pause` says, each time the loop wakes, why no call may start today (the daily
        budget, `budget.py`), or None."""
        self.budget_pause = pause

    def carry_cost(self, cost: float) -> None:
        """Add what the compactors before this one cost (a reopen brings a new one): the
        status says what the whole session cost."""
        self.cost += cost

    def message_logged(self) -> None:
        """A new message: every failed node may be tried again (SPEC §4.5), and a paused
        setup probed at once."""
        self.policy.message()
        self.wake()

    def wake(self) -> None:
        self._wake.set()

    @contextlib.contextmanager
    def waiting(self) -> Iterator[None]:
        """A scope in which someone waits for summaries (a turn, a `memory compact` client):
        while any is open, a failed node is tried again RETRY_SECONDS after its failure (SPEC
        §4.5). Counted, since the waits begin and end independently: one that ends must not
        take the timer from another."""
        self.policy.wait_began()
        self.wake()  # asleep until a message, it now times the retry of failed nodes
        try:
            yield
        finally:
            self.policy.wait_ended()

    @property
    def waited_on(self) -> bool:
        """Whether a `waiting()` scope is open."""
        return self.policy.waited_on

    def prioritize(self, nodes: Iterable[Node]) -> None:
        """The nodes a waiting turn needs go first (SPEC §4.1)."""
        self.policy.prioritize(nodes)
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
        self.policy.drain()
        while self.policy.in_flight:
            await self._landed.wait()

    # -- state ----------------------------------------------------------------------------

    @property
    def in_flight(self) -> frozenset[Node]:
        """The nodes whose calls run."""
        return self.policy.in_flight

    @property
    def failed_at(self) -> Mapping[Node, float]:
        """The nodes that wait for a message (or a retry), failed or held by a pause."""
        return self.policy.failed_at

    @property
    def setup_error(self) -> ProviderError | None:
        """Why its model cannot be used or reached (summaries are paused), or None."""
        return self.policy.setup_error

    @property
    def untrusted(self) -> bool:
        """Whether its model's lines keep failing the check against their input (SPEC §4.8)."""
        return self.policy.trust is Trust.DISTRUSTED

    def unbuilt(self) -> int:
        return self.chat.unbuilt_count()

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
        """A size loop ended on a line judged against its input; say when trust changes."""
        changed = self.policy.judged(grounded)
        if changed is Trust.DISTRUSTED:
            self._warn(
                f"memory: the compactor model's lines failed the check against their input "
                f"{self.policy.rejected_of_latest} times of the latest {TRUST_WINDOW}: each node "
                "is now asked once and cut from its input (a true excerpt) when its line "
                "fails; a stronger [memory] model would summarize them"
            )
        elif changed is Trust.TRUSTED:
            self._warn("memory: the compactor model's lines pass the check again")

    def status(self) -> CompactorStatus:
        # all unbuilt leaves (free ones are built at their append), not just the 8 that may
        # start, and the merges whose halves are built
        waiting = self.chat.builds_to_go()
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
                draining = self.policy.state is State.DRAINING
                if until_built and not self.in_flight and (draining or self._done()):
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
        idle = not self.policy.in_flight
        started = self.policy.start(self.work, self.clock())
        if started and idle:
            self._busy_since = self.clock()
        for node in started:
            group.start_soon(self._compact, node)

    def _stopped(self) -> bool:
        """Whether no call may start at all: the chat cannot take a line until a reopen (no
        call is worth paying), or the process drains before it exits."""
        return self.chat.broken is not None or self.policy.state is State.DRAINING

    def _over_budget(self) -> bool:
        """Whether the day's spending has reached the compactor's share of the daily budget:
        no call starts until it has not (a new day, a raised budget), looked at each time the
        loop wakes (a message, a call that lands). Said once, as a `memory:` warning."""
        why = self.budget_pause()
        if why is not None and self.budget_paused is None:
            self._warn(why)
        self.budget_paused = why
        return why is not None

    def can_start(self) -> bool:
        """Whether a call runs or one could start now: the work that keeps a service from
        exiting when idle (SPEC §11). A paused compactor, leaves behind the leaf window, and
        failed nodes that wait for a message are none."""
        if self.policy.in_flight:
            return True
        if self.chat.broken is not None or self.budget_paused is not None:
            return False
        return self.policy.can_start(self.work)

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

    def _timer(self) -> float:
        """Seconds until a timer may let a call start (`Policy.timer`); inf while no call may
        start at all: only a wake (a message, a call that lands, a new wait) moves the loop
        then, it never polls."""
        if self._stopped() or self.budget_paused:
            return math.inf
        return self.policy.timer(self.clock())

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
            write_status(self.chat.folder, status)
        return math.inf

    # -- one node -------------------------------------------------------------------------

    async def _compact(self, node: Node) -> None:
        try:
            with anyio.CancelScope() as scope:  # `cancel_in_flight` ends it, quietly
                self._scopes[node] = scope
                if not await self.chat.aclaim(node):
                    return  # another machine builds it (a chat shared through a database)
                try:
                    await self._attempt(node)
                finally:
                    if not self.chat.is_built(node):
                        with contextlib.suppress(StoreError):  # its lease lapses by itself
                            self.chat.release(node)
        except Exception as error:  # the disk (or the chat) could not take it
            outcome = held(error)
            self._report(node, outcome.reason)
            self._ended(node, outcome)
            self.policy.waits(node, self.clock())
        finally:
            self._scopes.pop(node, None)
            self.policy.landed(node)
            self._measure()
            landed, self._landed = self._landed, anyio.Event()
            landed.set()
            self.wake()

    async def _attempt(self, node: Node) -> None:
        try:
            line = await self._summarize(node)
        except Exception as error:
            outcome = classify(error, self.policy.trust, self.settings.deadline)
            if outcome.event is Event.HELD:
                raise  # reading the message or a line failed: `_compact` holds the node
            await self._after(node, outcome)
        else:
            self._ended(node, BUILT)
            await self.chat.abuild(node, redact(line, self.secrets))
            self.built += 1

    async def _after(self, node: Node, outcome: Outcome) -> None:
        """Does what a call that got no line asks: cut the node, count its failure, or pause."""
        if outcome.event is Event.SETUP_FAILED:
            assert outcome.error is not None
            self._setup_failed(outcome.error)  # before the policy hears it: said once
        self._ended(node, outcome)
        if outcome.event is Event.TOO_LONG:
            await self._cut(node)
        elif outcome.event is Event.REJECTED:
            await self.chat.acut(node)
        elif outcome.event is Event.FAILED:
            self._report(node, outcome.reason)
            await self.chat.afail(node)
            if not self.chat.is_built(node):  # the third failure built it cut
                self.policy.waits(node, self.clock())

    def _ended(self, node: Node, outcome: Outcome) -> None:
        """Tells the policy how the call ended; when that ends a pause, the nodes it held go
        on."""
        if self.policy.ended(node, outcome, self.clock()):
            self.wake()

    def _setup_failed(self, error: ProviderError) -> None:
        """A setup error: said once; the policy holds the node and lets one call probe."""
        if self.policy.setup_error is None and not self._until_built:
            # `memory compact` raises it; in a session, this is the only word of it
            how = "reached" if unreached(error) else "used"
            self._warn(
                f"memory: summaries are paused: the compactor's model cannot be {how} "
                f"({error}); they go on once it can"
            )
        self.last_error = str(error)

    async def _cut(self, node: Node) -> None:
        """Build a node whose task does not fit the window from its cut input (SPEC §2.5)."""
        await self.chat.acut(node)
        self._warn(
            f"memory: {node_name(node)} is too long for the compactor model's window "
            f"({self.settings.context_window:,} tokens); its line is its first 512 bytes"
        )

    def _report(self, node: Node, reason: str) -> None:
        """The latest error for the status; a warning at the node's first failure only."""
        reason = " ".join(reason.split()) or "unknown error"
        self.last_error = f"{node_name(node)}: {reason}"
        if self.policy.first_report(node):
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
        await self.chat.aread_inputs(node)  # a chat in a database reads them ahead
        task, inputs = self._task(node)
        context, finer = self._context(node, task, self.settings)
        # a merge may also draw on the finer lines of its own range (its task says so)
        tries = self.policy.rejections_allowed
        loop = SizeLoop(task, source_of(*inputs, *finer), self.settings.min_shared, tries)
        followups: list[tuple[str, str]] = []
        while True:
            settings = self.settings  # afresh for every request (see CompactorSettings)
            request = self._request(settings, context, loop.first_task, followups)
            if followups and estimate(request) > settings.context_window:
                return stored(loop.stop())  # the over-long line sent back would not fit
            finished, call = await self._call(node, request)
            thinking_only = not finished.text.strip() and any(
                isinstance(part, Thinking) for part in finished.parts
            )
            # checked and sent back as it would be stored: a key the model repeats stays out
            step = loop.take(redact(finished.text, self.secrets), thinking_only)
            if loop.rejected is not None:
                self.rejected += 1
            call.record(finished.usage, rejected=loop.rejected)
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
        nodes = self.chat.context_of(node)
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

    async def _call(self, node: Node, request: Request) -> tuple[Finished, Call]:
        """The call's complete reply, and the call (to record once its reply is judged); a
        turn's call that cuts it short makes it go again once the turns' calls are over (not a
        failure)."""
        while True:
            call = Call(self.provider, request, self._meter(node))
            try:
                async with self._turns_first():
                    return await self._send(call), call
            except Yielded:
                if call.answered:  # the server had begun: a call all the same (SPEC §1.8)
                    call.failed()

    def _turns_first(self) -> contextlib.AbstractAsyncContextManager[None]:
        if self.lane is None:
            return contextlib.nullcontext()
        return self.lane.compaction()

    async def _send(self, call: Call) -> Finished:
        """One call through the provider (and its retries), within the deadline. A failed one
        is accounted for here; a complete one by the caller, once its reply is judged. `call`
        tells the caller, should the lane cut the call short, whether it had been answered."""
        try:
            with anyio.fail_after(self.settings.deadline):
                return await call.run()
        except ProviderError as error:
            if refused_locally(error, call.answered):
                raise RefusedLocally(error) from None
            raise
        except TimeoutError:  # the deadline: the request went out and the model worked on it
            call.failed()
            raise

    def _meter(self, node: Node) -> Meter:
        """Where a call for `node` is accounted: the ledger, and the compactor's counts. A
        failed call that reported nothing is written as zeros."""
        return Meter(
            "compaction", self.ledger, node=node_name(node), on_cost=self._spent, unknown=Usage()
        )

    def _spent(self, cost: float) -> None:
        """One model call made, and what it cost."""
        self.calls += 1
        self.cost += cost

    def _task(self, node: Node) -> tuple[str, list[str]]:
        """The node's task, and what its line may draw on: its input, with the ids the task
        names (a line may say which messages it covers)."""
        level, index = node
        if level == 0:
            message = self.chat.record(index)
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
