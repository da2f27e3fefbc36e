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
subagent's report is
held the same way, except the report of one the user stopped: it reaches a running turn like any
report, but it never starts a turn of its own (see `holding.py`). Nothing carries over
from one turn to the next but the view.

No known secret (the configured key, the credential variables' values) reaches the log: the
Toolbox redacts every tool result, and every append of the session goes through `GuardedLog`.
"""

from __future__ import annotations

import math
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from contextlib import AsyncExitStack, asynccontextmanager, closing, suppress
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Literal, get_args

import anyio
from anyio.abc import TaskGroup

from evertalk.agent.catch_up import ViewWait
from evertalk.agent.held_queue import HeldQueue
from evertalk.agent.holding import Holding
from evertalk.agent.images import ImageStore
from evertalk.agent.lost_turn import LOST_LOCK
from evertalk.agent.permissions import Asker
from evertalk.agent.policy import Policy
from evertalk.agent.retry import BUSY, NothingToRetry, find_unanswered, turn_id
from evertalk.agent.subagents import AgentLog, Subagents
from evertalk.agent.tokens import TokenEstimate
from evertalk.agent.tool_watch import ToolWatch
from evertalk.agent.tools import Toolbox, ToolContext
from evertalk.agent.tools.checkpoints import Checkpoints, TurnCheckpoint, limits_of
from evertalk.agent.tools.sandbox import Sandbox
from evertalk.agent.turn import (
    BY_THE_USER,
    TURN_MAX_TOKENS,
    Ending,
    Held,
    Limits,
    TurnLoop,
    discard,
    explain,
)
from evertalk.budget import compactor_pause
from evertalk.chat import Chat
from evertalk.compactor.service import Compactor
from evertalk.config import (
    Config,
    redact,
    save_models,
    secret_values,
)
from evertalk.folder_instructions import find as find_instructions
from evertalk.folder_instructions import opening_block
from evertalk.ledger import DaySpending, Ledger, ledger_path
from evertalk.mcp_client.tools import McpTools
from evertalk.mcp_settings import McpSettings
from evertalk.memory.budget import Budget
from evertalk.memory.coarse import Fitted, render
from evertalk.memory.text import valid_unicode
from evertalk.prompts import turn_header
from evertalk.protocol.events import (
    AgentEvent,
    CatchingUp,
    MemoryWarning,
    Recorded,
    ReplyLogged,
    TurnEnded,
    TurnStarted,
)
from evertalk.protocol.status import AgentStatus as AgentStatus
from evertalk.providers.base import Image, Provider, Tool
from evertalk.providers.lane import turns_first
from evertalk.runtime import Runtime, cache_key
from evertalk.runtime import configuration_problem as configuration_problem
from evertalk.store.compactor_status import catch_up_seconds
from evertalk.store.errors import StoreError
from evertalk.store.message_log import MessageLog, NewMessage

if TYPE_CHECKING:
    from evertalk.agent.sharing import Sharing
from evertalk.terminal_text import one_line

RESTART_SECONDS = 5.0
"""A compactor stopped by a bug starts again after this long: a session without one would
leave every new message a placeholder, and turns would see less and less."""


def subagent_marker(name: str) -> str:
    """The marker of a subagent's header: what follows is a task to do, not a compaction."""
    return (
        f"Turn: you are the subagent {name}, working in the background for Ever. A task "
        "follows: do it, then reply with your report. It is not a compaction task."
    )


class NotConfigured(Exception):
    """No provider can be called: no API key anywhere. The message is one line."""


def limits_for(config: Config) -> Limits:
    """The turn's limits for the configured context window. A small window also gets a smaller
    output cap, so that the prompt keeps three quarters of it; no window set: the defaults."""
    window = config.turn.context_window
    if window is None:
        return Limits()
    return Limits(max_tokens=min(TURN_MAX_TOKENS, window // 4), context_budget=window)


@dataclass(frozen=True)
class GuardedLog(MessageLog):
    """A log as the session's loops write to it. Every text has the known secrets replaced
    first: tool calls (the model may repeat a key it was shown), results and replies alike (SPEC
    §1.7: the log holds everything, forever). With a compactor (the main chat), each message
    also wakes it, so that a turn's own messages are summarized while it runs and the next turn
    finds its view settled (and failed nodes get their retry at the next message, SPEC §4.5)."""

    inner: MessageLog
    secrets: Sequence[str]
    compactor: Compactor | None = None

    def log_message(self, message: NewMessage) -> list[int]:
        ids = self.inner.log_message(replace(message, text=redact(message.text, self.secrets)))
        if self.compactor is not None:
            self.compactor.message_logged()
        return ids

    async def alog_message(self, message: NewMessage) -> list[int]:
        """`log_message`, awaited: a chat in a database logs in its own thread."""
        redacted = replace(message, text=redact(message.text, self.secrets))
        inner = self.inner
        ids = (
            await inner.alog_message(redacted)
            if isinstance(inner, Chat)
            else inner.log_message(redacted)
        )
        if self.compactor is not None:
            self.compactor.message_logged()
        return ids

    async def aappend(self, kind: str, text: str, *, key: str | None = None) -> list[int]:
        return await self.alog_message(NewMessage(kind, text, key))

    async def flushed(self) -> None:
        """Once what was written is logged (a shared chat's turn log is written in order, in
        the database's thread: `shared_log.py`)."""
        flushed = getattr(self.inner, "flushed", None)
        if flushed is not None:
            await flushed()


OutsideKind = Literal["user", "ever", "tool", "echo", "note"]
OUTSIDE_KINDS: tuple[OutsideKind, ...] = get_args(OutsideKind)


@dataclass(frozen=True)
class Outside:
    """A message logged from outside a turn: its kind, its text, its original time (None: now),
    a key that makes it logged once, and its images."""

    kind: OutsideKind
    text: str
    date: datetime | None = None
    key: str | None = None
    images: tuple[Image, ...] = ()


@asynccontextmanager
async def _providers(
    runtime: Runtime, given: Provider | None
) -> AsyncIterator[tuple[Provider, Provider]]:
    """The turns' provider and the compactor's: the given one serves both; else the configured
    ones, closed at the end (shielded: a cancelled session still closes its connections)."""
    if given is not None:
        yield given, given
        return
    turns = runtime.provider()
    # its own provider when the compactor calls another server
    memory = runtime.memory_provider(turns)
    try:
        yield turns, memory
    finally:
        with anyio.CancelScope(shield=True):
            await turns.aclose()
            if memory is not turns:
                await memory.aclose()


def runs(logged: Sequence[tuple[str, int]]) -> list[tuple[str, int, int]]:
    """(machine, first id, count) of each run of consecutive ids one machine logged."""
    found: list[tuple[str, int, int]] = []
    for machine, i in logged:
        if found and found[-1][0] == machine and found[-1][1] + found[-1][2] == i:
            found[-1] = (machine, found[-1][1], found[-1][2] + 1)
        else:
            found.append((machine, i, 1))
    return found


def _open_chat(home: Path, runtime: Runtime, budget: Budget, search: bool) -> Chat:
    """The home's chat: in its folder, or in the database `[store] url` names, with the
    folder kept for what belongs to this machine."""
    url = runtime.config.store_url
    if url is None:
        return Chat.open(home / "chat", budget=budget, search=search)
    from evertalk.pgstore.session import DatabaseDown, PgSession
    from evertalk.shared_chat import SharedChat, machine_name

    session = PgSession(url, machine_name(home))
    lease = runtime.config.store_lease_seconds
    try:
        chat = SharedChat.open_shared(session, home / "chat", budget=budget, lease_seconds=lease)
    except DatabaseDown:  # the service does not start: nothing tries again
        raise StoreError(session.down_line or "the database cannot be reached") from None
    if search:
        chat.warnings.append("memory: search is kept for a chat in files only, not in a database")
    return chat


async def _opened_chat(home: Path, runtime: Runtime, budget: Budget, search: bool) -> Chat:
    """`_open_chat`; one in a database in a worker thread, as it waits for the database."""
    if runtime.config.store_url is None:
        return _open_chat(home, runtime, budget, search)
    return await anyio.to_thread.run_sync(_open_chat, home, runtime, budget, search)


def _local_now() -> datetime:
    return datetime.now().astimezone()


class Agent:
    """One session of the chat. Make it with `Agent.open`; everything runs in its task group."""

    def __init__(
        self,
        *,
        home: Path,
        runtime: Runtime,
        chat: Chat,
        provider: Provider,
        compactor: Compactor,
        toolbox: Toolbox,
        ledger: Ledger,
        workdir: Path,
        clock: Callable[[], datetime],
        limits: Limits,
        group: TaskGroup,
        catch_up_timeout: float | None = None,
        mcp: McpTools | None = None,
    ) -> None:
        self.home = home
        self.runtime = runtime
        self.chat = chat
        self.provider = provider
        self.compactor = compactor
        compactor.warn_to(self._memory_warning)
        self.toolbox = toolbox
        self.mcp = mcp or McpTools(McpSettings())  # the other MCP servers' tools
        self.mcp.on_change = self._tools_changed
        compactor.use_tools(self.tools())  # a server may have listed its tools already
        self.mcp.on_warning = self._memory_warning
        self.ledger = ledger
        self.workdir = workdir
        self.clock = clock
        self.limits = limits
        self.estimate = TokenEstimate()  # tokens from bytes, measured over the session's calls
        self.model = runtime.config.model
        self.tool_watch = ToolWatch(offered=bool(runtime.tools))
        self.secrets = secret_values(runtime.config)
        # the one way into the main log: secrets replaced, then the compactor woken
        self.log = GuardedLog(chat, self.secrets, compactor)
        # the turns': queued for a chat in a database, so that no turn waits for it on the loop
        self.turn_log = GuardedLog(chat.turn_log(), self.secrets, compactor)
        self.sandbox = Sandbox.configured(runtime.config.tools)  # one for the turn and subagents
        self.view_wait = ViewWait(
            chat,
            compactor,
            settle_timeout=runtime.config.memory.settle_timeout,
            catch_up_timeout=(
                runtime.config.memory.catch_up_timeout
                if catch_up_timeout is None
                else catch_up_timeout
            ),
            to_go=chat.summaries_to_go,
            tokens=self.estimate.tokens,
        )
        self.agents_dir = chat.folder / "agents"
        self.images = ImageStore(chat.folder / "images")
        self.cache_key = cache_key(home, "turn")  # per chat and role (SPEC §7)
        self.subagent_cache_key = cache_key(home, "subagent")
        # what write and edit replace, for undo; a subagent's go with the turn that started it
        self.checkpoints = Checkpoints(home / "checkpoints", limits_of(runtime.config))
        self.checkpoint: TurnCheckpoint | None = None
        self.held = HeldQueue(chat.folder, self.images, self.clock)  # durable (SPEC §6.4)
        self.holding = Holding(
            self.held, self.log, self.images, chat, woken=self._woken, turning=lambda: self._turning
        )
        self.subagents = Subagents(
            self.agents_dir,
            group,
            self._run_subagent,
            self.holding.hold,
            self._changed,
            record=self.holding.record_now,
            stopped=self.holding.report_stopped,
        )
        self.turn_cost = 0.0
        # the status's cost: the day's, from the ledger, so that a restart does not reset it
        self.spent_today = None if ledger is None else DaySpending(ledger.path)
        compactor.follow_budget(compactor_pause(self._spent, runtime.config.budget_daily))
        self._sender, self._receiver = anyio.create_memory_object_stream[AgentEvent](math.inf)
        self._wake = anyio.Event()
        self._change = anyio.Event()
        self._scope: anyio.CancelScope | None = None
        self._cancelled_by: str | None = None  # why the running turn was cancelled
        self._closing_by: str | None = None  # why the session is closing (`closing`)
        self._turning = False
        self._closed = False
        self._opened = False
        self._taken: list[Held] = []  # what the running turn took: held again if it lost its lock
        self._turn_no = 0  # the running turn's id (`turn_id`), once it has logged its opening
        self._lost_stop: int | None = None  # a turn that lost its lock: its stop, to be logged
        self.sharing: Sharing | None = None  # a chat shared with other machines (`share`)
        self._recorded_ahead: tuple[list[Outside], tuple[list[int], int] | StoreError] | None = None

    # -- opening ----------------------------------------------------------------------------

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
        runtime = Runtime.load(home)
        if provider is None and (problem := configuration_problem(home, runtime.config)):
            raise NotConfigured(problem)
        # the views' budgets follow the turn model's window (a change refits them, said once)
        budget = Budget.for_window(runtime.config.turn.context_window)
        async with AsyncExitStack() as stack:
            search = runtime.config.memory.search  # keeps the search index as records come
            chat = stack.enter_context(closing(await _opened_chat(home, runtime, budget, search)))
            turns, memory = await stack.enter_async_context(_providers(runtime, provider))
            copy = chat.usage_copy()  # a shared chat keeps every machine's calls in its ledger
            ledger = stack.enter_context(closing(Ledger(ledger_path(home), copy)))
            lane = runtime.turn_lane()  # turns first on a server that serves one at a time
            compactor = Compactor(
                chat,
                memory,
                runtime.compactor_settings(),
                system=runtime.system,
                tools=runtime.tools,
                ledger=ledger,
                secrets=secret_values(runtime.config),
                lane=lane,
            )
            policy = Policy(runtime.config.tools, granted=granted, interactive=asker is not None)
            # no servers to start when the model is offered no tools
            servers = runtime.config.mcp if runtime.tools else McpSettings()
            mcp = await stack.enter_async_context(McpTools.open(servers, home))
            body_error: BaseException | None = None
            try:
                async with anyio.create_task_group() as group:
                    agent = cls(
                        home=home,
                        runtime=runtime,
                        chat=chat,
                        provider=turns_first(turns, lane),
                        compactor=compactor,
                        toolbox=Toolbox(policy, asker, mcp),
                        ledger=ledger,
                        workdir=(workdir or runtime.config.workdir_path or Path.cwd()).resolve(),
                        clock=clock or _local_now,
                        limits=limits or limits_for(runtime.config),
                        group=group,
                        catch_up_timeout=catch_up_timeout,
                        mcp=mcp,
                    )
                    agent.holding.recover()
                    if runtime.config.store_url is not None:
                        agent.share(stack, group)
                    group.start_soon(agent._compact)
                    group.start_soon(agent._drive)
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

    def share(self, stack: AsyncExitStack, group: TaskGroup) -> None:
        """Follow the other machines of a shared chat, and take turns with them."""
        from evertalk.agent.sharing import Sharing
        from evertalk.shared_chat import SharedChat

        chat, url = self.chat, self.runtime.config.store_url
        assert isinstance(chat, SharedChat) and url is not None
        sharing = Sharing(chat, url, self.compactor, self._others_logged, self._memory_warning)
        stack.callback(sharing.close)
        self.sharing = sharing
        group.start_soon(sharing.follow)

    def _others_logged(self, logged: list[tuple[str, int]]) -> None:
        """Messages other machines logged: each window is told, a run of one machine's at a
        time, with the first one's id to read them by (a single one's text comes along)."""
        for machine, first, count in runs(logged):
            if count == 1:
                record = self.chat.record(first)
                text = redact(record.text, self.secrets)
                self._send(Recorded(machine, 1, record.kind, text, first=first))
            else:
                self._send(Recorded(machine, count, first=first))

    @property
    def closed(self) -> bool:
        """It takes no more messages: the service opens another agent, or stops."""
        return self._closed

    def _close(self) -> None:
        """No more turns: messages typed but never delivered are still the user's words."""
        self._closed = True
        self._sender.close()
        self._receiver.close()
        try:
            if self.held:
                self.holding.log_all(self.held.take())
            self.held.settle(self.chat.logged)
        finally:
            self.held.close()

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
        if self._closed:
            raise RuntimeError("the agent is closed")
        if not text.strip():
            raise ValueError("an empty message cannot be sent")
        # as it will be logged: a lone surrogate (from a broken terminal or pipe) cannot be
        # encoded for the model either
        # the database was reachable when last asked (the service asks first, `aready`): a
        # StoreError, one line, when not, and the user keeps the message
        self.chat.reachable()
        held = Held(
            "user",
            valid_unicode(text),
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
        if self._closed:
            raise RuntimeError("the agent is closed")
        ahead, self._recorded_ahead = self._recorded_ahead, None
        if ahead is not None and ahead[0] == list(messages):
            if isinstance(ahead[1], StoreError):
                raise ahead[1]
            return ahead[1]
        ids: list[int] = []
        skipped = 0
        with self.chat.one_sync():
            for message in messages:
                if message.key is not None and self.chat.logged(message.key):
                    skipped += 1
                    continue
                ids += self.log.append(
                    message.kind,
                    message.text,
                    key=message.key,
                    images=self.images.save_all(message.images),
                    date=message.date,
                )
        return ids, skipped

    async def record_ahead(self, messages: Sequence[Outside]) -> None:
        """Log them now, awaited (a chat in a database logs in its own thread), for the
        `record` of the same messages that comes next to answer at once: the service's handler,
        which runs on the event loop (`shared_requests.py`)."""
        if self._closed:
            return
        try:
            outcome: tuple[list[int], int] | StoreError = await self._arecord(messages)
        except StoreError as error:
            outcome = error
        self._recorded_ahead = (list(messages), outcome)

    async def _arecord(self, messages: Sequence[Outside]) -> tuple[list[int], int]:
        await self.chat.alogged_keys(m.key for m in messages if m.key is not None)
        ids: list[int] = []
        skipped = 0
        for message in messages:
            if message.key is not None and self.chat.logged(message.key):
                skipped += 1
                continue
            images = self.images.save_all(message.images)
            new = NewMessage(message.kind, message.text, message.key, images, date=message.date)
            ids += await self.log.alog_message(new)
        return ids, skipped

    def holds_key(self, key: str) -> bool:
        """Whether a message with this idempotency key is held for a turn or was logged."""
        return self.held.holds(key) or self.chat.logged(key)

    def retry(self) -> list[int]:
        """Try the last unanswered message again: a new turn for it, as `submit` would start,
        but the message is already in the log and is not logged again (see `retry.py`); its
        ids. NothingToRetry (one line) when the last message has a reply, or a turn runs."""
        if self._closed:
            raise RuntimeError("the agent is closed")
        if self.busy:  # the running turn, or the next, answers what is held
            raise NothingToRetry(BUSY)
        message = find_unanswered(self.chat, self.images.folder)
        self.holding.hold(message)
        return list(message.ids)

    async def events_sent(self) -> None:
        """Until the events sent so far have been taken by `events()` (briefly at most): what
        a UI is asked next comes after what it was told before."""
        for _ in range(100):
            if self._receiver.statistics().current_buffer_used == 0:
                return
            await anyio.sleep(0)

    def events_waiting(self) -> bool:
        """Whether events were sent that `events()` has not given yet."""
        return self._receiver.statistics().current_buffer_used > 0

    async def events(self) -> AsyncIterator[AgentEvent]:
        """Every event, in order, for one consumer; ends when the agent closes."""
        with suppress(anyio.ClosedResourceError):
            async for event in self._receiver:
                yield event

    def use_model(self, model: str) -> None:
        """Turns use `model` from the next one on, and config.toml keeps it for the next start.
        A running turn ends on the model it began with: the thoughts it sends back are signed
        by that model. A bad name or a file that cannot be written is a ConfigError (one
        line), and then nothing changes."""
        save_models(self.home, model=model)
        if model != self.model:
            self.tool_watch.restart()
        self.model = model
        self._changed()

    def carry_costs(self, turns: float, summaries: float) -> None:
        """Add what the agents closed before this one spent (a reopen brings a new agent):
        on turns and subagents, and on summaries. Its status says what the whole session
        cost."""
        self.turn_cost += turns
        self.compactor.carry_cost(summaries)

    def use_memory_model(self, model: str, effort: str | None) -> None:
        """The compactor uses `model` (and `effort`; None keeps the current one) from its next
        call on, and config.toml keeps them for the next start. A ConfigError (one line), and
        no change, for a bad value or a file that cannot be written."""
        save_models(self.home, memory_model=model, memory_effort=effort)
        effort = self.compactor.settings.effort if effort is None else effort
        self.compactor.use_model(model, effort)
        self._changed()

    def cancel(self, why: str = BY_THE_USER) -> None:
        """Cancel the running turn, at once; what it logged stays logged, with `why`."""
        if self._scope is not None:
            self._cancelled_by = self._cancelled_by or why
            self._scope.cancel()

    def closing(self, why: str) -> None:
        """The session is about to close for `why` (the service stops): a turn still running
        then is logged as stopped for it, not as cancelled by the user."""
        self._closing_by = why

    def _stopped_by(self) -> str:
        return self._cancelled_by or self._closing_by or BY_THE_USER

    @property
    def busy(self) -> bool:
        """A turn runs, or messages are held for one."""
        return self._turning or bool(self.held)

    @property
    def turning(self) -> bool:
        """A turn runs (messages may be held besides)."""
        return self._turning

    async def stop_turn(self, why: str) -> None:
        """Cancel the running turn for `why` and return once it has ended, its stop logged (a
        turn that starts meanwhile, for a message held, is cancelled too)."""
        while self._turning:
            self.cancel(why)
            await self._change.wait()

    async def wait_idle(self) -> None:
        """Until no turn runs and no message is held."""
        while self.busy:
            await self._change.wait()

    async def wait_quiet(self) -> None:
        """Until no turn runs, no message is held and no subagent works (headless mode)."""
        while self.busy or self.subagents.running:
            await self._change.wait()

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
            cost=self._spent(),
            turn_cost=self.turn_cost,
            busy=self.busy,
            subagents=len(self.subagents.running),
            compactor_failed=compactor.failed,
            compactor_error=compactor.last_error,
            compactor_paused=compactor.paused,
            catching_up=self._behind(),
            tools_unused=self.tool_watch.unused,
            chat_error=self.chat.broken,
            mcp_problems=self.mcp.problems(),
            budget=self.runtime.config.budget_daily,
        )

    def _behind(self) -> CatchingUp | None:
        """How far the memory is behind, when it is far (`MemoryCore.catch_up`): the summaries
        before a turn's view is whole, the figure a waiting turn shows (`ViewWait`), with a time
        at the compactor's measured pace (or a conservative default)."""
        if not self.chat.catch_up().behind:
            return None
        to_go = self.view_wait.summaries_to_go(self._bare_room)
        if not to_go:  # the rest of the work is the compactor's queue, which the bar shows
            return None
        rate = self.compactor.rate()
        seconds = catch_up_seconds(to_go, rate, self.compactor.settings.concurrency)
        return CatchingUp(to_go, seconds)

    def _spent(self) -> float:
        """Today's cost of the chat's home from the ledger; without one, this session's."""
        if self.spent_today is None:
            return self.turn_cost + self.compactor.cost
        return self.spent_today.cost()

    def _bare_room(self) -> int:
        """The room for the view beside an opening with no message: the status's bound before
        any turn has fitted the view."""
        loop = self._loop(self.log, self._context(), master=True)
        return loop.view_room(self._opening([]))

    # -- the inside -------------------------------------------------------------------------

    def _emit(self, event: AgentEvent) -> None:
        if isinstance(event, ReplyLogged):  # shown (and printed by -p) as it was logged
            event = ReplyLogged(redact(event.text, self.secrets))
        # the notice goes before the turn's end that makes it due: `-p` stops reading there
        notice = self.tool_watch.observe(event, self.model)
        if notice is not None:
            self._send(notice)
        self._send(event)

    def _send(self, event: AgentEvent) -> None:
        with suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
            self._sender.send_nowait(event)

    def _changed(self) -> None:
        self._change.set()
        self._change = anyio.Event()

    def _woken(self) -> None:
        """A turn may have something new to take."""
        self._wake.set()
        self._changed()

    def _add_cost(self, cost: float) -> None:
        self.turn_cost += cost

    def _memory_warning(self, text: str) -> None:
        self._emit(MemoryWarning(text))

    def tools(self) -> list[Tool]:
        """What every call carries: the built-in tools, then the MCP servers' (none with
        `[turn] tools = "off"`). The same list, byte for byte, until a server's listing changes:
        it is part of the cached prefix (SPEC §5)."""
        built_in = self.runtime.tools
        return [*built_in, *self.mcp.definitions] if built_in else built_in

    def _tools_changed(self) -> None:
        """A server's tools came (or changed): compactions carry the turns' list too, so that
        both keep one prefix (SPEC §4.2)."""
        self.compactor.use_tools(self.tools())

    async def _compact(self) -> None:
        """The compactor, for the whole session. A bug that stops it is reported (once for
        the same error) and it starts again: turns meanwhile see placeholders."""
        said = None
        while True:
            try:
                await self.compactor.run()
            except Exception as error:
                why = one_line(_describe(error))
                if why != said:
                    said = why
                    self._memory_warning(
                        f"memory: the compactor stopped ({why}); it starts again in "
                        f"{RESTART_SECONDS:g} seconds"
                    )
                await anyio.sleep(RESTART_SECONDS)

    async def _drive(self) -> None:
        """Start a turn whenever messages are held and none runs."""
        while True:
            if not self.held:
                self._wake = anyio.Event()
                await self._wake.wait()
                continue
            if self.sharing is None:
                await self._turn()
            else:
                async with self.sharing.turn(lambda: self.cancel(LOST_LOCK)) as fence:
                    await self._log_lost_stop()
                    if not fence.lost:
                        await self._turn()
            await self.holding.aafter_turn()
            self._changed()

    def _loop(
        self, log: MessageLog, context: ToolContext, *, master: bool, model: str | None = None
    ) -> TurnLoop:
        return TurnLoop(
            provider=self.provider,
            model=model or self.model,
            effort=self.runtime.config.turn.effort,
            system=self.runtime.system,
            tools=self.tools(),
            toolbox=self.toolbox,
            context=context,
            log=log,
            images=self.images,
            ledger=self.ledger,
            role="turn" if master else "subagent",
            emit=self._emit if master else discard,
            take_held=self._take_held if master else _nothing,
            on_cost=self._add_cost,
            limits=self.limits,
            cache_key=self.cache_key if master else self.subagent_cache_key,
            estimate=self.estimate,
            stopped_by=self._stopped_by,
        )

    def _context(self, *, agent: str | None = None) -> ToolContext:
        return ToolContext(
            self.chat,
            self.workdir,
            self.agents_dir,
            is_subagent=agent is not None,
            start_agent=None if agent is not None else self.subagents.start,
            agent=agent,
            secrets=self.secrets,
            home=self.home,
            sandbox=self.sandbox,
            checkpoint=self.checkpoint,
        )

    async def _turn(self) -> None:
        self._turning = True
        self._changed()
        self._opened = False
        self._taken = []
        ended: TurnEnded | None = None
        try:
            try:
                with anyio.CancelScope() as scope:
                    self._scope = scope
                    ended = await self._open_turn()
            except Exception as error:  # the log failed, or refused a turn that lost its lock
                ended = TurnEnded("error", explain(error))
            if self._cancelled_by == LOST_LOCK and (ended is None or ended.reason == "error"):
                ended = await self._lost_turn()
            elif ended is None:  # cancelled
                if not self._opened:  # still settling: what the user said is kept all the same
                    await self.holding.alog_all(self.held.take())
                ended = TurnEnded("cancelled")
        except Exception as error:  # the log failed (a full disk): say so, keep the session
            ended = TurnEnded("error", explain(error))
        finally:
            self._scope = None
            self._cancelled_by = None
            self._turning = False
            self._checkpoint_views()
        self._emit(ended)

    def _take_held(self) -> list[Held]:
        """The held messages, taken by the running turn (which keeps note of them)."""
        taken = self.held.take()
        self._taken += taken
        return taken

    async def _lost_turn(self) -> TurnEnded:
        """A turn stopped by its lost lock (a shared chat): what it took is held again, to be
        answered once this machine holds the turn, and its stop is logged then."""
        assert self.sharing is not None
        taken, self._taken = self._taken, []
        try:  # the log says which of them it logged
            taken = await anyio.to_thread.run_sync(self.sharing.again, taken)
        except StoreError as error:
            self._memory_warning(f"memory: {error}")
        self.held.put_back(taken)
        if self._opened:
            self._lost_stop = self._turn_no
        self._memory_warning(
            f"memory: {LOST_LOCK}: the turn stopped, and runs again once this machine holds it"
        )
        return TurnEnded("cancelled")

    async def _log_lost_stop(self) -> None:
        """The stop of a turn that lost its lock, now that this machine holds the turn again
        (the lost turn may have logged it: its key keeps it to once)."""
        turn, self._lost_stop = self._lost_stop, None
        if turn is None:
            return
        try:
            await self.log.aappend("echo", f"turn stopped: {LOST_LOCK}", key=f"turn-{turn}-stop")
        except StoreError:
            self._lost_stop = turn  # lost again, or the database is down: at the next turn

    def _checkpoint_views(self) -> None:
        """After a turn, off its hot path: view.json if a checkpoint is due by time."""
        # A chat that cannot save says so at its next change; the next open folds forward.
        with suppress(StoreError):
            self.chat.tick()

    async def _open_turn(self) -> TurnEnded:
        """The settle wait (or catching up), the view, the message logged, then the loop (SPEC
        §6.1). Messages held during the wait join the opening, and the view is fitted to the
        room they leave."""
        log = self.turn_log
        await self.mcp.started()  # their tools from the first turn: each start is bounded
        sent_from = [held.workdir for held in self.held if held.workdir is not None]
        if sent_from:  # the tools work where the client that sent the message does
            self.workdir = sent_from[-1]
        # fixed here: what joins the opening or the turn later cannot switch the model mid-turn
        asked = [held.model for held in self.held if held.model is not None]
        loop = self._loop(log, self._context(), master=True, model=asked[-1] if asked else None)

        def room() -> int:
            waiting = list(self.held)
            return loop.view_room(self._opening(waiting), _images(waiting))

        fitted = await self.view_wait.ready(self._emit, room)
        held = self._take_held()
        self._opened = True
        if not fitted.fits:
            return await self._unanswerable(held)
        await self.chat.aread_texts(fitted.lines)  # a chat in a database reads them ahead
        view = self._render(fitted)
        ids = await self.holding.alog_all(held)
        self._emit(TurnStarted(ids))
        turn = self._turn_no = turn_id(held, ids, self.chat.t)  # ids[0], but for a retried one
        self.checkpoint = self.checkpoints.turn(turn)
        loop.context = replace(loop.context, checkpoint=self.checkpoint)
        ending = await loop.run(view, fitted.recent + self._opening(held), turn, _images(held))
        # its messages are logged before it ends (one refused as stale cancels it meanwhile)
        await log.flushed()
        return ending.event

    async def _unanswerable(self, held: list[Held]) -> TurnEnded:
        """A message too long for the model's window even beside the coarsest view: no turn
        can answer it. It was accepted, so it is logged all the same (SPEC §1.3: what a client
        was told is accepted is kept), followed by the turn's stop saying why it got no reply;
        a model with a larger window can answer it by a retry."""
        window = self.limits.context_budget
        what = "this message does not" if len(held) <= 1 else "these messages do not"
        why = (
            f"{what} fit the model's context window ({window:,} tokens) beside even the "
            "shortest view of the chat, so no reply could be made: shorten it, or choose a "
            "model with a larger window ([turn] context_window) and retry"
        )
        ids = await self.holding.alog_all(held)
        turn = turn_id(held, ids, self.chat.t)
        await self.log.aappend("echo", f"turn stopped: {why}", key=f"turn-{turn}-stop")
        return TurnEnded("context_full", why)

    def _opening(self, held: Sequence[Held]) -> str:
        header = turn_header(self.clock())
        return self._folder_block() + header + "\n" + "\n\n".join(m.text for m in held)

    def _folder_block(self) -> str:
        """The working folder's AGENTS.md (or CLAUDE.md), read afresh, before the header: after
        the view, so that the cached prefix stays the same (`folder_instructions.py`)."""
        block = opening_block(find_instructions(self.workdir))
        return block + "\n" if block else ""

    def _render(self, fitted: Fitted) -> str:
        """The view as the turn sees it: the core's, unless it had to be fitted to the window
        (then for this turn only: the core's view stays as view.json has it)."""
        return render(fitted.lines, self.chat.line_of)

    async def _run_subagent(self, name: str, task: str, agent_log: AgentLog) -> Ending:
        log = GuardedLog(agent_log, self.secrets)
        context = self._context(agent=name)
        loop = self._loop(log, context, master=False)
        header = turn_header(self.clock(), subagent_marker(name))
        opening = self._folder_block() + header + "\n" + task
        fitted = await self.view_wait.ready(discard, lambda: loop.view_room(opening))
        view = self._render(fitted)
        log.append("user", task)
        return await loop.run(view, opening, name)


def _images(held: Sequence[Held]) -> list[Image]:
    return [image for message in held for image in message.images]


def _describe(error: BaseException) -> str:
    """`Type: message`, of the one error inside a task group's group when there is one."""
    while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        error = error.exceptions[0]
    return explain(error)


def _nothing() -> list[Held]:
    return []
