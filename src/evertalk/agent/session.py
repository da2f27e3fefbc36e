"""A running agent: the chat, its compactor, turns one after another, and subagents.

    async with Agent.open(home, asker=asker) as agent:
        agent.submit("where does the log rotate?")
        async for event in agent.events():
            ...

A message submitted while no turn runs starts one (SPEC §6.1): the nodes the turn needs go
first in the compactor's queue, the turn waits at most `memory.settle_timeout` seconds for every
line of the view to be built (`Settling`), renders the view, logs the message, and runs the call
`[tools] [system] [view] [header + message]` and its tool loop. When the chat is behind and the
view would not fit the turn model's window, the turn first waits for it to catch up
(`CatchingUp`, see `catch_up.py`), and never fails for it. A message submitted during a turn
(or during its wait) is held and delivered between two tool calls, or, if the turn ends first,
starts the next turn together with any other held message (SPEC §6.4). Every held message is
written to `chat/held.jsonl` first, with its key, so that a crash while it waits loses nothing
a client was told is accepted: the next open delivers what the log does not have yet, first. A
subagent's report is held the same way, except the report of one the user stopped: it reaches a
running turn like any report, but it never starts a turn of its own (see `holding.py`). Nothing
carries over from one turn to the next but the view.

No known secret (the configured key, the credential variables' values) reaches the log: the
Toolbox redacts every tool result, and every append of the session goes through `GuardedLog`.

`Agent` is what the service and the tests hold; the work is done by its parts, each in a
module of its own: `wiring.py` opens them (and keeps the compactor running), `calls.py` makes
the loops of turns and subagents, `driver.py` runs the turns, `outbox.py` carries the events,
`outside.py` logs the messages that come from outside a turn, `costs.py` keeps what was spent.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from contextlib import asynccontextmanager
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
from anyio.abc import TaskGroup

from evertalk.agent.calls import Calls
from evertalk.agent.calls import subagent_marker as subagent_marker
from evertalk.agent.costs import Costs
from evertalk.agent.driver import Stopping, TurnDriver
from evertalk.agent.guarded_log import GuardedLog
from evertalk.agent.images import ImageStore
from evertalk.agent.outbox import Outbox
from evertalk.agent.outside import Outside as Outside
from evertalk.agent.outside import Recorder
from evertalk.agent.permissions import Asker
from evertalk.agent.retry import BUSY, NothingToRetry, find_unanswered
from evertalk.agent.tools.checkpoints import Checkpoints, limits_of
from evertalk.agent.turn import BY_THE_USER, Held, Limits
from evertalk.agent.wiring import NotConfigured as NotConfigured
from evertalk.agent.wiring import Options, Parts, keep_compacting, open_parts, share
from evertalk.config import save_models, secret_values
from evertalk.protocol.events import AgentEvent
from evertalk.protocol.status import AgentStatus as AgentStatus
from evertalk.providers.base import Image, Provider
from evertalk.runtime import configuration_problem as configuration_problem

if TYPE_CHECKING:
    from evertalk.agent.sharing import Sharing


class Agent:
    """One session of the chat. Make it with `Agent.open`; everything runs in its task group."""

    def __init__(self, parts: Parts, options: Options, group: TaskGroup) -> None:
        self.home, self.runtime, self.chat = parts.home, parts.runtime, parts.chat
        self.provider, self.compactor, self.toolbox = parts.provider, parts.compactor, parts.toolbox
        self.mcp, self.ledger = parts.mcp, parts.ledger  # mcp: the other MCP servers' tools
        self.secrets = secret_values(parts.runtime.config)
        # the one way into the main log: secrets replaced, then the compactor woken
        self.log = GuardedLog(parts.chat, self.secrets, parts.compactor)
        # the turns': queued for a chat in a database, so that no turn waits for it on the loop
        turn_log = GuardedLog(parts.chat.turn_log(), self.secrets, parts.compactor)
        self.images = ImageStore(parts.chat.folder / "images")
        # what write and edit replace, for undo; a subagent's go with the turn that started it
        self.checkpoints = Checkpoints(parts.home / "checkpoints", limits_of(parts.runtime.config))
        self.outbox = Outbox(parts.chat, self.secrets)
        self.costs = Costs(parts.ledger, parts.compactor, parts.runtime.config.budget_daily)
        self.stopping = Stopping()
        self.calls = Calls(
            parts,
            options,
            log=self.log,
            images=self.images,
            outbox=self.outbox,
            on_cost=self.costs.add,
            stopped_by=self.stopping.why,
        )
        self.limits, self.view_wait = self.calls.limits, self.calls.view_wait
        self.driver = TurnDriver(
            self.calls,
            self.stopping,
            group,
            turn_log=turn_log,
            checkpoints=self.checkpoints,
        )
        self.held, self.holding = self.driver.held, self.driver.holding
        self.subagents = self.driver.subagents
        self.recorder = Recorder(parts.chat, self.log, self.images)
        self.closed = False  # it takes no more messages: the service opens another agent, or stops
        self.compactor.warn_to(self.outbox.warn)
        self.mcp.on_warning = self.outbox.warn

    # -- opening and closing -----------------------------------------------------------------

    @classmethod
    @asynccontextmanager
    async def open(
        cls,
        home: Path,
        *,
        asker: Asker | None,
        granted: Iterable[str] = (),
        provider: Provider | None = None,
        workdir: Path | None = None,
        clock: Callable[[], datetime] | None = None,
        limits: Limits | None = None,
        catch_up_timeout: float | None = None,
    ) -> AsyncIterator[Agent]:
        """Open the chat (its lock: `ChatLocked` propagates), the runtime, the provider (gated;
        `NotConfigured` without a key) unless one is given, a running compactor and the tools.
        At exit a running turn and the subagents are cancelled (what they logged stays), and
        everything is closed. `asker` None is headless: `ask` counts as `deny`.
        `catch_up_timeout`: the longest a turn waits for a chat that is behind (`catch_up.py`;
        default: `memory.catch_up_timeout`)."""
        options = Options(workdir, clock, limits, catch_up_timeout)
        async with open_parts(home, asker=asker, granted=granted, provider=provider) as parts:
            body_error: BaseException | None = None
            try:
                async with anyio.create_task_group() as group:
                    agent = cls(parts, options, group)
                    agent._start(parts, group)
                    try:
                        yield agent
                    except BaseException as error:
                        body_error = error
                        raise
                    finally:
                        agent._close()
                        group.cancel_scope.cancel()
            except BaseExceptionGroup as errors:
                # the caller's own error comes out as itself, not wrapped by the task group
                if body_error is not None and list(errors.exceptions) == [body_error]:
                    raise body_error from None
                raise

    def _start(self, parts: Parts, group: TaskGroup) -> None:
        """Messages accepted before the last stop are held again; for a shared chat, the other
        machines are followed; the compactor and the turns start."""
        self.holding.recover()
        if self.runtime.config.store_url is not None:
            self.driver.sharing = share(parts, self.outbox, group)
        group.start_soon(keep_compacting, self.compactor, self.outbox.warn)
        group.start_soon(self.driver.drive)

    def _close(self) -> None:
        """No more turns: messages typed but never delivered are still the user's words."""
        self.closed = True
        self.outbox.close()
        self.driver.close()

    # -- what the user interface calls ------------------------------------------------------

    def submit(
        self,
        text: str,
        images: Sequence[Image] = (),
        *,
        key: str | None = None,
        workdir: Path | None = None,
        model: str | None = None,
    ) -> None:
        """A user message (with the images attached to it): it starts a turn when none runs,
        else it is held for the running turn (delivered between two tool calls) or, if that turn
        ends first, the next. Messages that come while a turn still waits for its view to settle
        join its opening message. `key` is logged with it (a client's idempotency key);
        `workdir` is where the tools of the turn it opens work (else the session's); `model`
        is the model that turn runs on (else the session's, which stays as it is). A message
        that joins a turn already under way leaves that turn on its model. It is durable when
        this returns (`chat/held.jsonl`); a StoreError (one line) when it cannot be made so,
        and then nothing is held."""
        if self.closed:
            raise RuntimeError("the agent is closed")
        if not text.strip():
            raise ValueError("an empty message cannot be sent")
        # the database was reachable when last asked (the service asks first, `aready`): a
        # StoreError, one line, when not, and the user keeps the message
        self.chat.reachable()
        held = Held(
            "user",
            text,  # as the log keeps it: the service made it so (`service/requests.kept_text`)
            images=tuple(images),
            key=key,  # `_keep` gives one to a message sent without
            workdir=workdir,
            model=model,
        )
        self.holding.hold(held, strict=True)

    def record(self, messages: Sequence[Outside]) -> tuple[list[int], int]:
        """Log messages that come from outside any turn (an import, another agent's note, a
        captured message), in order, each unless its key was logged before; they start no
        turn. (ids, skipped). They are not part of a turn, so a running one does not make them
        wait: it may be waiting for a permission answer for as long as the user is away, and
        it never sees them (its view was rendered before); the next turn's view has them."""
        if self.closed:
            raise RuntimeError("the agent is closed")
        return self.recorder.record(messages)

    async def record_ahead(self, messages: Sequence[Outside]) -> None:
        """Log them now, awaited (a chat in a database logs in its own thread), for the
        `record` of the same messages that comes next to answer at once: the service's handler,
        which runs on the event loop (`service/read_ahead.py`)."""
        if not self.closed:
            await self.recorder.record_ahead(messages)

    def holds_key(self, key: str) -> bool:
        """Whether a message with this idempotency key is held for a turn or was logged."""
        return self.held.holds(key) or self.chat.logged(key)

    def retry(self) -> list[int]:
        """Try the last unanswered message again: a new turn for it, as `submit` would start,
        but the message is already in the log and is not logged again (see `retry.py`); its
        ids. NothingToRetry (one line) when the last message has a reply, or a turn runs."""
        if self.closed:
            raise RuntimeError("the agent is closed")
        if self.busy:  # the running turn, or the next, answers what is held
            raise NothingToRetry(BUSY)
        message = find_unanswered(self.chat, self.images.folder)
        self.holding.hold(message)
        return list(message.ids)

    async def events_sent(self) -> None:
        """Until the events sent so far have been taken by `events()` (briefly at most): what
        a UI is asked next comes after what it was told before."""
        await self.outbox.sent()

    def events_waiting(self) -> bool:
        """Whether events were sent that `events()` has not given yet."""
        return self.outbox.waiting()

    def events(self) -> AsyncIterator[AgentEvent]:
        """Every event, in order, for one consumer; ends when the agent closes."""
        return self.outbox.events()

    def use_model(self, model: str) -> None:
        """Turns use `model` from the next one on, and config.toml keeps it for the next start.
        A running turn ends on the model it began with: the thoughts it sends back are signed
        by that model. A bad name or a file that cannot be written is a ConfigError (one
        line), and then nothing changes."""
        save_models(self.home, model=model)
        self.calls.use_model(model)
        self.driver.changed()

    def carry_costs(self, turns: float, summaries: float) -> None:
        """Add what the agents closed before this one spent (a reopen brings a new agent):
        on turns and subagents, and on summaries. Its status says what the whole session
        cost."""
        self.costs.carry(turns, summaries)

    def use_memory_model(self, model: str, effort: str | None) -> None:
        """The compactor uses `model` (and `effort`; None keeps the current one) from its next
        call on, and config.toml keeps them for the next start. A ConfigError (one line), and
        no change, for a bad value or a file that cannot be written."""
        save_models(self.home, memory_model=model, memory_effort=effort)
        effort = self.compactor.settings.effort if effort is None else effort
        self.compactor.use_model(model, effort)
        self.driver.changed()

    def cancel(self, why: str = BY_THE_USER) -> None:
        """Cancel the running turn, at once; what it logged stays logged, with `why`."""
        self.stopping.cancel(why)

    def closing(self, why: str) -> None:
        """The session is about to close for `why` (the service stops): a turn still running
        then is logged as stopped for it, not as cancelled by the user."""
        self.stopping.closing(why)

    async def stop_turn(self, why: str) -> None:
        """Cancel the running turn for `why` and return once it has ended, its stop logged (a
        turn that starts meanwhile, for a message held, is cancelled too)."""
        await self.driver.stop_turn(why)

    async def wait_idle(self) -> None:
        """Until no turn runs and no message is held."""
        await self.driver.until(lambda: not self.busy)

    async def wait_quiet(self) -> None:
        """Until no turn runs, no message is held and no subagent works (headless mode)."""
        await self.driver.until(lambda: not (self.busy or self.subagents.running))

    def status(self) -> AgentStatus:
        compactor = self.compactor.status()
        core = self.chat.core
        return AgentStatus(
            model=self.model,
            view_bytes=core.view.size,
            view_ceiling=core.budget.ceiling,
            view_floor=core.budget.floor,
            merging=core.view.shrinking,
            view_merges=core.t - len(core.view),  # each message adds a line, each merge drops one
            compactor_running=compactor.running,
            compactor_queued=compactor.queued,
            cost=self.costs.spent(),
            turn_cost=self.costs.turn_cost,
            busy=self.busy,
            subagents=len(self.subagents.running),
            compactor_failed=compactor.failed,
            compactor_error=compactor.last_error,
            compactor_paused=compactor.paused,
            catching_up=self.calls.behind(),
            tools_unused=self.calls.tool_watch.unused,
            chat_error=self.chat.broken,
            mcp_problems=self.mcp.problems(),
            budget=self.runtime.config.budget_daily,
        )

    # -- what the parts keep, as the session's -----------------------------------------------

    @property
    def busy(self) -> bool:
        """A turn runs, or messages are held for one."""
        return self.driver.busy

    @property
    def turning(self) -> bool:
        """A turn runs (messages may be held besides)."""
        return self.driver.turning

    @property
    def model(self) -> str:
        """The model of the next turn (a message may ask for another, for its turn)."""
        return self.calls.model

    @property
    def workdir(self) -> Path:
        """Where the next turn's tools work (a message may bring its client's folder)."""
        return self.calls.workdir

    @property
    def turn_cost(self) -> float:
        """What this session's turns and subagents cost, with what closed sessions carried."""
        return self.costs.turn_cost

    @property
    def sharing(self) -> Sharing | None:
        """The chat shared with other machines (`wiring.share`); None for a chat in files."""
        return self.driver.sharing
