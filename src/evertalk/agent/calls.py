"""How a session's turns and subagents call the model: `Calls` makes their loops and tool
contexts from the session's parts, the model and working folder of the moment, and the view
they wait for; what a turn shows goes through its `emit`, past the watch over the tools."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path

from evertalk.agent.catch_up import ViewWait
from evertalk.agent.guarded_log import GuardedLog
from evertalk.agent.images import ImageStore
from evertalk.agent.outbox import Outbox
from evertalk.agent.subagents import AgentLog
from evertalk.agent.tokens import TokenEstimate
from evertalk.agent.tool_watch import ToolWatch
from evertalk.agent.tools import StartAgent, ToolContext
from evertalk.agent.tools.checkpoints import TurnCheckpoint
from evertalk.agent.tools.sandbox import Sandbox
from evertalk.agent.turn import TURN_MAX_TOKENS, Ending, Held, Limits, TurnLoop, discard
from evertalk.agent.wiring import Options, Parts
from evertalk.config import Config, redact
from evertalk.folder_instructions import find as find_instructions
from evertalk.folder_instructions import opening_block
from evertalk.memory.coarse import Fitted, render
from evertalk.prompts import turn_header
from evertalk.protocol.events import AgentEvent, CatchingUp, ReplyLogged
from evertalk.providers.base import Image, Tool
from evertalk.runtime import cache_key
from evertalk.store.compactor_status import catch_up_seconds
from evertalk.store.message_log import MessageLog


def subagent_marker(name: str) -> str:
    """The marker of a subagent's header: what follows is a task to do, not a compaction."""
    return (
        f"Turn: you are the subagent {name}, working in the background for Ever. A task "
        "follows: do it, then reply with your report. It is not a compaction task."
    )


def limits_for(config: Config) -> Limits:
    """The turn's limits for the configured context window. A small window also gets a smaller
    output cap, so that the prompt keeps three quarters of it; no window set: the defaults."""
    window = config.turn.context_window
    if window is None:
        return Limits()
    return Limits(max_tokens=min(TURN_MAX_TOKENS, window // 4), context_budget=window)


def images_of(held: Sequence[Held]) -> list[Image]:
    return [image for message in held for image in message.images]


def _nothing() -> list[Held]:
    return []


def _view_wait(parts: Parts, options: Options, estimate: TokenEstimate) -> ViewWait:
    memory = parts.runtime.config.memory
    timeout = options.catch_up_timeout
    return ViewWait(
        parts.chat,
        parts.compactor,
        settle_timeout=memory.settle_timeout,
        catch_up_timeout=memory.catch_up_timeout if timeout is None else timeout,
        to_go=parts.chat.summaries_to_go,
        tokens=estimate.tokens,
    )


def _local_now() -> datetime:
    return datetime.now().astimezone()


class Calls:
    """The calls of one session's turns and subagents; `log` is the main chat's, as the
    session writes to it. `model` and `workdir` are the ones the next turn uses; `checkpoint`
    is the running turn's (its subagents' edits go with it); `start_agent` starts a subagent,
    once the session has made them."""

    def __init__(
        self,
        parts: Parts,
        options: Options,
        *,
        log: GuardedLog,
        images: ImageStore,
        outbox: Outbox,
        on_cost: Callable[[float], None],
        stopped_by: Callable[[], str],
    ) -> None:
        config = parts.runtime.config
        self.parts = parts
        self.runtime, self.chat, self.compactor = parts.runtime, parts.chat, parts.compactor
        self.log, self.images, self.outbox = log, images, outbox
        self.on_cost, self.stopped_by = on_cost, stopped_by
        self.workdir = (options.workdir or config.workdir_path or Path.cwd()).resolve()
        self.clock = options.clock or _local_now
        self.limits = options.limits or limits_for(config)
        self.model = config.model
        self.secrets = outbox.secrets
        self.estimate = TokenEstimate()  # tokens from bytes, measured over the session's calls
        self.tool_watch = ToolWatch(offered=bool(parts.runtime.tools))
        self.sandbox = Sandbox.configured(config.tools)  # one for the turn and subagents
        self.view_wait = _view_wait(parts, options, self.estimate)
        self.agents_dir = parts.chat.folder / "agents"
        self.cache_key = cache_key(parts.home, "turn")  # per chat and role (SPEC §7)
        self.subagent_cache_key = cache_key(parts.home, "subagent")
        self.checkpoint: TurnCheckpoint | None = None
        self.start_agent: StartAgent | None = None
        parts.mcp.on_change = self.tools_changed
        self.tools_changed()  # a server may have listed its tools already

    def tools(self) -> list[Tool]:
        """What every call carries: the built-in tools, then the MCP servers' (none with
        `[turn] tools = "off"`). The same list, byte for byte, until a server's listing changes:
        it is part of the cached prefix (SPEC §5)."""
        built_in = self.runtime.tools
        return [*built_in, *self.parts.mcp.definitions] if built_in else built_in

    def tools_changed(self) -> None:
        """A server's tools came (or changed): compactions carry the turns' list too, so that
        both keep one prefix (SPEC §4.2)."""
        self.compactor.use_tools(self.tools())

    def use_model(self, model: str) -> None:
        """Turns use `model` from the next one on; the watch over the tools starts afresh."""
        if model != self.model:
            self.tool_watch.restart()
        self.model = model

    def emit(self, event: AgentEvent) -> None:
        """Show a turn's event (a reply as it was logged, secrets replaced)."""
        if isinstance(event, ReplyLogged):  # shown (and printed by -p) as it was logged
            event = ReplyLogged(redact(event.text, self.secrets))
        # the notice goes before the turn's end that makes it due: `-p` stops reading there
        notice = self.tool_watch.observe(event, self.model)
        if notice is not None:
            self.outbox.send(notice)
        self.outbox.send(event)

    def loop(
        self,
        log: MessageLog,
        context: ToolContext,
        *,
        master: bool,
        model: str | None = None,
        take_held: Callable[[], list[Held]] = _nothing,
    ) -> TurnLoop:
        """A turn's loop (`master`: it takes held messages and shows its events), or a
        subagent's."""
        return TurnLoop(
            provider=self.parts.provider,
            model=model or self.model,
            effort=self.runtime.config.turn.effort,
            system=self.runtime.system,
            tools=self.tools(),
            toolbox=self.parts.toolbox,
            context=context,
            log=log,
            images=self.images,
            ledger=self.parts.ledger,
            role="turn" if master else "subagent",
            emit=self.emit if master else discard,
            take_held=take_held if master else _nothing,
            on_cost=self.on_cost,
            limits=self.limits,
            cache_key=self.cache_key if master else self.subagent_cache_key,
            estimate=self.estimate,
            stopped_by=self.stopped_by,
        )

    def context(self, *, agent: str | None = None) -> ToolContext:
        return ToolContext(
            self.chat,
            self.workdir,
            self.agents_dir,
            is_subagent=agent is not None,
            start_agent=None if agent is not None else self.start_agent,
            agent=agent,
            secrets=self.secrets,
            home=self.parts.home,
            sandbox=self.sandbox,
            checkpoint=self.checkpoint,
        )

    def opening(self, held: Sequence[Held]) -> str:
        header = turn_header(self.clock())
        return self.folder_block() + header + "\n" + "\n\n".join(m.text for m in held)

    def folder_block(self) -> str:
        """The working folder's AGENTS.md (or CLAUDE.md), read afresh, before the header: after
        the view, so that the cached prefix stays the same (`folder_instructions.py`)."""
        block = opening_block(find_instructions(self.workdir))
        return block + "\n" if block else ""

    def render(self, fitted: Fitted) -> str:
        """The view as the turn sees it: the core's, unless it had to be fitted to the window
        (then for this turn only: the core's view stays as view.json has it)."""
        return render(fitted.lines, self.chat.line_of)

    async def run_subagent(self, name: str, task: str, agent_log: AgentLog) -> Ending:
        log = GuardedLog(agent_log, self.secrets)
        context = self.context(agent=name)
        loop = self.loop(log, context, master=False)
        header = turn_header(self.clock(), subagent_marker(name))
        opening = self.folder_block() + header + "\n" + task
        fitted = await self.view_wait.ready(discard, lambda: loop.view_room(opening))
        view = self.render(fitted)
        log.append("user", task)
        return await loop.run(view, opening, name)

    def behind(self) -> CatchingUp | None:
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

    def _bare_room(self) -> int:
        """The room for the view beside an opening with no message: the status's bound before
        any turn has fitted the view."""
        loop = self.loop(self.log, self.context(), master=True)
        return loop.view_room(self.opening([]))
