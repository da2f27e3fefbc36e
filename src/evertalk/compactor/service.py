"""The compactor: an anyio service that builds the nodes the memory core says are ready.

At most `concurrency` calls run at once (SPEC §4.1). Work is taken from the core's queues
in priority order: the nodes a waiting turn needs, then leaves oldest first, then merges
lower level first. A built line goes to disk before the core hears of it, so a crash never
loses one: a node is either in tree/ or will be built again after a restart.
"""

from __future__ import annotations

import contextlib
import math
import os
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass

import anyio

from evertalk.chat import Chat
from evertalk.compactor.line import Done, FollowUp, SizeLoop
from evertalk.compactor.status import CompactorStatus, write_status
from evertalk.compactor.tasks import leaf_task, merge_task
from evertalk.ledger import Ledger
from evertalk.memory import Node, node_name
from evertalk.memory.view import render
from evertalk.providers.base import (
    Finished,
    Provider,
    ProviderError,
    Request,
    Thinking,
    Tool,
    collect,
)
from evertalk.providers.layout import compaction_request
from evertalk.providers.prices import cost as price_of

RETRY_SECONDS = 10.0  # while a turn waits, a failed node is tried again this long after (§4.5)

# A wrong key or an unknown model is the setup's fault, not the node's: counting it as a
# failure would cut every node after three tries. Such errors pause the node instead.
SETUP_ERRORS = frozenset({"auth", "not_found"})


class UnusableReply(Exception):
    """No try of the size loop gave a non-empty line (SPEC §4.4 step 5)."""


@dataclass(frozen=True)
class CompactorSettings:
    """Read afresh for every request: replacing `Compactor.settings` changes the model and
    effort from the next call on (`Agent.use_memory_model`)."""

    model: str
    effort: str | None = "high"
    concurrency: int = 8
    deadline: float = 600.0
    max_tokens: int = 16_000  # a line needs ~170 tokens; the rest is room for thinking
    cache_key: str | None = None


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
    ) -> None:
        self.chat = chat
        self.provider = provider
        self.settings = settings
        self.system = system
        self.tools = tools
        self.ledger = ledger
        self.clock = clock
        self.in_flight: set[Node] = set()
        self.failed_at: dict[Node, float] = {}
        self.urgent: list[Node] = []
        self.waiting = False  # a turn (or `memory compact`) waits: failed nodes retry on a timer
        self.last_error: str | None = None
        self.setup_error: ProviderError | None = None
        self.calls = 0
        self.built = 0
        self.cost = 0.0
        self._wake = anyio.Event()
        self._status_at = -math.inf

    # -- what the outside tells the service -----------------------------------------------

    def message_logged(self) -> None:
        """A new message: every failed node may be tried again (SPEC §4.5)."""
        self.failed_at.clear()
        self.wake()

    def wake(self) -> None:
        self._wake.set()

    def prioritize(self, nodes: Iterable[Node]) -> None:
        """The nodes a waiting turn needs go first (SPEC §4.1)."""
        self.urgent = list(nodes)
        self.wake()

    # -- state ----------------------------------------------------------------------------

    def unbuilt(self) -> int:
        return sum(row.count(0) for row in self.chat.core.tree.flags)

    def status(self) -> CompactorStatus:
        queued = len(self.chat.core.queues.ready_leaves(self.chat.core.tree))
        queued += self.chat.core.queues.merge_count()
        return CompactorStatus(
            pid=os.getpid(),
            running=len(self.in_flight),
            queued=max(0, queued - len(self.in_flight) - len(self.failed_at)),
            failed=len(self.failed_at),
            last_error=self.last_error,
            calls=self.calls,
            built=self.built,
            cost=round(self.cost, 6),
        )

    # -- running --------------------------------------------------------------------------

    async def run(self, until_built: bool = False) -> None:
        """Build nodes until cancelled; with `until_built`, until every node is built (or the
        setup fails: a wrong key or model is raised as the ProviderError it is)."""
        async with anyio.create_task_group() as group:
            while True:
                self._wake = anyio.Event()
                # after a setup error, one call at a time probes whether the setup works again
                limit = 1 if self.setup_error else self.settings.concurrency
                while len(self.in_flight) < limit:
                    node = self._next()
                    if node is None:
                        break
                    self.in_flight.add(node)
                    group.start_soon(self._compact, node)
                self._publish()
                if until_built and not self.in_flight and self._done():
                    break
                with anyio.move_on_after(self._retry_delay()):
                    await self._wake.wait()
            group.cancel_scope.cancel()
        self._publish(force=True)
        if self.setup_error is not None:
            raise self.setup_error

    def _done(self) -> bool:
        return self.setup_error is not None or self.unbuilt() == 0

    def _next(self) -> Node | None:
        core = self.chat.core
        now = self.clock()
        for node, failed in list(self.failed_at.items()):
            if self.waiting and now - failed >= RETRY_SECONDS:
                del self.failed_at[node]
        skip = self.in_flight | self.failed_at.keys()
        for node in self.urgent:
            if node not in skip and core.pending_error(node) is None:
                return node
        for index in core.queues.ready_leaves(core.tree):
            if (0, index) not in skip:
                return (0, index)
        return core.queues.first_merge(core.tree, skip)

    def _retry_delay(self) -> float:
        if not (self.waiting and self.failed_at):
            return math.inf
        soonest = min(self.failed_at.values()) + RETRY_SECONDS
        return max(0.0, soonest - self.clock())

    def _publish(self, force: bool = False) -> None:
        now = time.monotonic()
        if force or now - self._status_at >= 1.0:
            self._status_at = now
            # the status file is a courtesy to other terminals; the chat does not depend on it
            with contextlib.suppress(OSError):
                write_status(self.chat.store.path, self.status())

    # -- one node -------------------------------------------------------------------------

    async def _compact(self, node: Node) -> None:
        try:
            await self._attempt(node)
        except Exception as error:  # a bug or a disk error must not kill the service
            self.last_error = f"{node_name(node)}: {type(error).__name__}: {error}"
            self.failed_at[node] = self.clock()
        finally:
            self.in_flight.discard(node)
            self.wake()

    async def _attempt(self, node: Node) -> None:
        try:
            line = await self._summarize(node)
        except ProviderError as error:
            if error.kind not in SETUP_ERRORS:
                self._fail(node, error)
                return
            self.setup_error = error
            self.last_error = str(error)
            self.failed_at[node] = self.clock()
            return
        except (TimeoutError, UnusableReply) as error:
            self._fail(node, error)
            return
        self.setup_error = None
        self.chat.build(node, line)
        self.built += 1

    def _fail(self, node: Node, error: Exception) -> None:
        self.setup_error = None  # a call got through to the model: the setup works
        reason = str(error) or type(error).__name__
        self.last_error = f"{node_name(node)}: {reason}"
        self.chat.fail(node)
        if not self.chat.core.tree.is_built(node):  # the third failure built it cut
            self.failed_at[node] = self.clock()

    async def _summarize(self, node: Node) -> str:
        core = self.chat.core
        context = render(core.context(node), self.chat.text_of)
        loop = SizeLoop(self._task(node))
        followups: list[tuple[str, str]] = []
        while True:
            request = compaction_request(
                self.settings.model,
                self.system,
                self.tools,
                context,
                loop.first_task,
                followups,
                self.settings.max_tokens,
                self.settings.effort,
                self.settings.cache_key,
            )
            finished = await self._call(node, request)
            thinking_only = not finished.text.strip() and any(
                isinstance(part, Thinking) for part in finished.parts
            )
            step = loop.take(finished.text, thinking_only)
            if isinstance(step, Done):
                return step.line
            if not isinstance(step, FollowUp):
                raise UnusableReply("the model gave no usable line")
            followups.append((finished.text, step.text))

    async def _call(self, node: Node, request: Request) -> Finished:
        started = time.monotonic()
        with anyio.fail_after(self.settings.deadline):
            finished = await collect(self.provider, request)
        self.calls += 1
        # the request's model, not the settings': they may change while the call runs
        cost = price_of(self.provider.name, request.model, finished.usage)
        self.cost += cost or 0.0
        if self.ledger is not None:
            self.ledger.record(
                role="compaction",
                provider=self.provider.name,
                model=request.model,
                usage=finished.usage,
                cost=cost,
                duration_ms=(time.monotonic() - started) * 1e3,
                node=node_name(node),
            )
        return finished

    def _task(self, node: Node) -> str:
        level, index = node
        if level == 0:
            message = self.chat.store.read_message(index)
            return leaf_task(index, message.kind, message.text)
        left, right = (level - 1, 2 * index), (level - 1, 2 * index + 1)
        left_text, right_text = self.chat.text_of(left), self.chat.text_of(right)
        assert left_text is not None and right_text is not None
        return merge_task(left, left_text, right, right_text)
