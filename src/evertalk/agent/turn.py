"""One turn's tool loop (SPEC §6.2–§6.4), shared by the master's turns and the subagents.

A turn is a fresh conversation: `[tools] [system] [view] [header + message]`, then the turn's own
steps. Everything is logged the moment it happens, in the order the model saw it:

- each reply text as `ever` once the reply's stream has ended, the texts between two tool calls
  joined: a stream that breaks off midway is tried again from the start (`retry.py`, the
  turns' policy), so only a whole reply may be logged. The user sees the text as it streams;
  a try that broke off is said to be replaced (`Retrying.replaces`), and a cancel logs what was
  shown (below);
- each tool call as `tool` (`name` + space + compact JSON input) before the tool runs;
- each result as `echo` (`name: output`, clipped to 30,000 characters, images stored and listed),
  marked `failed` when the call failed (an error result, a refusal, a command that exited with a
  status other than 0 or timed out, a call cut short by a cancel);
- each message delivered mid-turn as `user` or `work`, after the results of the step it joins,
  and only when another call will carry it: a message that the turn's end would leave
  unanswered stays held, and opens the next turn;
- why the turn stopped, when it did not simply finish, as one last `echo` (`turn stopped: …`):
  an error, a limit, a reply cut off by the output limit or refused, a cancel by the user or a
  stop of the service (said by the cut tool's own `echo` when one was running), so that the next
  turn knows why;
- on a cancel, or a call that failed for good after its reply began, the reply text shown so
  far and not yet logged, as `ever` with a last line that says it was cut off there
  (`REPLY_CUT`): the log keeps what the user saw.

The reply's stop reason decides what follows: a refused reply, or one cut off by the output
limit, ends the turn (a limit's reply still runs its tool calls if they all came whole); a
paused one (Anthropic `pause_turn`) goes back as is for the model to carry on.

Thoughts are streamed to the user, sent back within the turn as the API requires, and never
logged; they go when the turn ends, with the rest of its steps. Appends carry idempotency keys
derived from the turn and the step (`turn-<first id>-<step>-<n>`, `turn-<first id>-stop` for
the stop), so that a re-sent append never logs a message twice.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

import anyio

from evertalk.agent.images import ImageStore
from evertalk.agent.permissions import CALL_WORKDIR
from evertalk.agent.tokens import Streamed, TokenEstimate
from evertalk.agent.tools import Toolbox, ToolContext, ToolOutcome
from evertalk.context_budget import CONTEXT_BUDGET as CONTEXT_BUDGET
from evertalk.ledger import Ledger
from evertalk.protocol import events
from evertalk.providers.base import (
    BYTES_PER_TOKEN,
    Event,
    Finished,
    Image,
    Message,
    Part,
    Provider,
    ProviderError,
    Request,
    Retrying,
    Text,
    TextDelta,
    TextDone,
    ThinkingDelta,
    Tool,
    ToolResult,
    ToolUse,
)
from evertalk.providers.call import Call, Meter
from evertalk.providers.layout import turn_request
from evertalk.store.errors import StoreError, describe
from evertalk.store.message_log import MessageLog
from evertalk.terminal_text import one_line

TURN_MAX_TOKENS = 16_000
"""Output cap of one call of a turn (a manual thinking budget is added on top by the adapter)."""

REPLY_CUT = "[the reply was cut off here: "
"""How the last line of a reply logged as it stood at a cancel begins (then why, and `]`)."""

BY_THE_USER = "cancelled by the user"
"""Why a turn stopped, when its cancel came from a client."""

MAX_STEPS = 200
"""Model calls in one turn at most: a loop that never ends costs without bound."""


NO_OUTPUT = "(no output)"
"""What an empty tool output is shown and logged as (an API refuses an empty text block)."""


@dataclass(frozen=True)
class Limits:
    max_tokens: int = TURN_MAX_TOKENS
    context_budget: int = CONTEXT_BUDGET
    max_steps: int = MAX_STEPS


@dataclass(frozen=True)
class Held:
    """A message that came in while a turn ran: a user's words, or a subagent's report."""

    kind: Literal["user", "work"]
    text: str
    agent: str | None = None
    images: tuple[Image, ...] = ()  # attached by the user; sent after the text (SPEC §6.2)
    key: str | None = None  # a client's idempotency key: logged with the message
    workdir: Path | None = None  # where the client that sent it works: the turn's tools too
    model: str | None = None  # the turn it opens runs on this model (`-p --model`), not the set one


@dataclass(frozen=True)
class Ending:
    """How a loop ended: the event for the UI, and the text of the last reply (a subagent's
    report)."""

    event: events.TurnEnded
    final: str


@dataclass
class _Step:
    """What one call of a turn has logged so far."""

    key: str  # `turn-<first id>-<step>`: the step's n-th logged message has the key `<key>-<n>`
    logged: int = 0
    replies: list[str] = field(default_factory=list)  # texts logged since the last tool call
    block: list[str] = field(default_factory=list)  # the deltas of the text block that streams
    unlogged: list[str] = field(default_factory=list)  # texts shown whole but not logged yet
    streamed: Streamed = field(default_factory=Streamed)  # to bill a call cancelled midway


def discard(event: events.AgentEvent) -> None:
    """An emit that shows nothing (a subagent's events)."""


def _none() -> list[Held]:
    return []


def compact_json(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def tool_text(name: str, tool_input: dict[str, Any]) -> str:
    """A `tool` message: the name, a space, the compact JSON input (SPEC §1.2)."""
    return f"{name} {compact_json(tool_input)}"


def explain(error: BaseException) -> str:
    """One line for the user: a storage error's own words (they name the file and what to
    do), the OS's reason for an OSError; `Type: message` for anything else, which is a bug."""
    if isinstance(error, StoreError):
        text = str(error)
    elif isinstance(error, OSError):
        text = describe(error)
    else:
        text = f"{type(error).__name__}: {error}"
    return one_line(text) or type(error).__name__


@dataclass
class TurnLoop:
    """Runs the calls and tools of one turn (or of one subagent)."""

    provider: Provider
    model: str
    effort: str | None
    system: str
    tools: list[Tool]
    toolbox: Toolbox
    context: ToolContext
    log: MessageLog
    images: ImageStore
    ledger: Ledger | None = None
    role: Literal["turn", "subagent"] = "turn"
    emit: Callable[[events.AgentEvent], None] = discard
    take_held: Callable[[], list[Held]] = _none
    on_cost: Callable[[float], None] = lambda cost: None
    limits: Limits = Limits()
    cache_key: str | None = None
    estimate: TokenEstimate = field(default_factory=TokenEstimate)
    """Tokens from bytes: the session's, measured over its calls (see tokens.py)."""
    stopped_by: Callable[[], str] = lambda: BY_THE_USER
    """Why a cancel stopped the turn: the user, or the service stopping (and why)."""
    _running: tuple[str, str] | None = field(default=None, init=False, repr=False)
    """The tool that runs now, and the key of its `echo`."""
    _step: _Step | None = field(default=None, init=False, repr=False)
    """The step under way: what of its reply was shown and not logged."""

    async def run(
        self, view: str, opening: str, turn_id: int | str, images: Sequence[Image] = ()
    ) -> Ending:
        """The loop, from the opening text (header + message, or header + task) and the
        message's images to the end.

        Errors end the turn, with an `echo` saying why; cancellation propagates (what was
        logged stays, and an `echo` says that the user cancelled, or what tool it cut short).
        """
        if isinstance(turn_id, int) and self.role == "turn":  # a search leaves the turn out
            self.context = replace(self.context, turn_from=turn_id)
        try:
            return await self._loop(view, [Text(opening), *images], turn_id)
        except anyio.get_cancelled_exc_class():
            self._cancelled(turn_id)
            raise
        except ProviderError as error:
            why = f"the model call failed: {error}"
            with contextlib.suppress(Exception):  # a failing log must not hide the error
                self._log_shown(why, after_tool=False)
            return self._end(turn_id, "error", why, kind=error.kind)
        except Exception as error:  # a bug or a full disk must not take the session down
            why = explain(error)
        return self._end(turn_id, "error", why)

    def _cancelled(self, turn_id: int | str) -> None:
        """Log why the turn has no answer, and who stopped it: the next turn reads it in the
        view. A running tool's `echo` says it, in the slot its result would have taken. The
        reply text shown so far and not logged is logged after it, marked as cut off."""
        why = self.stopped_by()
        running, self._running = self._running, None
        # the appends are synchronous, so the cancel cannot cut one in half; the shield only
        # makes sure of it. A failing log must not hide the cancellation.
        with anyio.CancelScope(shield=True), contextlib.suppress(Exception):
            if running is not None:  # a call cut short failed; a stop is no call's echo
                name, key = running
                text = f"{name}: {why} before it finished; the turn stopped there"
                self.log.append("echo", text, key=key, failed=True)
            self._log_shown(why, after_tool=running is not None)
            if running is None:
                self.log.append("echo", f"turn stopped: {why}", key=f"turn-{turn_id}-stop")

    def _log_shown(self, why: str, *, after_tool: bool) -> None:
        """The reply text the user saw stream and the log has not, as `ever`, its last line
        saying it was cut off there. `after_tool`: it comes after the running tool's `echo`."""
        step = self._step
        if step is None:
            return
        shown = "".join([*step.unlogged, *step.block]).strip()
        step.unlogged.clear()
        step.block.clear()
        if shown:
            slot = step.logged + (2 if after_tool else 0)  # the running tool has two slots
            text = f"{shown}\n\n{REPLY_CUT}{why}]"
            self.log.append("ever", text, key=f"{step.key}-{slot}")

    def _end(
        self,
        turn_id: int | str,
        reason: events.EndReason,
        why: str,
        final: str = "",
        kind: str | None = None,
    ) -> Ending:
        """Stop the turn, saying why in the log (once per turn: the key is the turn's)."""
        with contextlib.suppress(Exception):  # the log itself failed: nothing more can be written
            self.log.append("echo", f"turn stopped: {why}", key=f"turn-{turn_id}-stop")
        return Ending(events.TurnEnded(reason, why, kind), final)

    def _request(self, view: str, tail: list[Part], steps: list[Message]) -> Request:
        request = turn_request(
            self.model,
            self.system,
            self.tools,
            view,
            tail,
            steps,
            self.limits.max_tokens,
            self.effort,
            self.cache_key,
        )
        return replace(request, person_waits=True)  # the turns' retries (retry.py)

    async def _loop(self, view: str, tail: list[Part], turn_id: int | str) -> Ending:
        steps: list[Message] = []
        request = self._request(view, tail, steps)
        needed = self.estimate.tokens(_request_bytes(request)) + self.limits.max_tokens
        for step in range(self.limits.max_steps + 1):
            # whether another call can be made is decided before held messages are taken: a
            # message logged as delivered must reach the model (else it opens the next turn)
            ending = self._no_room(turn_id, step, needed)
            if ending is not None:
                return ending
            if step > 0:
                if steps[-1].role == "user":  # not after a paused reply, which goes back as is
                    steps[-1] = self._deliver(turn_id, step - 1, steps[-1])
                request = self._request(view, tail, steps)
            current = self._step = _Step(f"turn-{turn_id}-{step}")
            finished = await self._call(request, turn_id, current)
            answer = await self._answer(finished, current, turn_id)
            if isinstance(answer, Ending):
                return answer
            steps += answer
            added = _bytes_of(answer[-1].parts) if answer[-1].role == "user" else 0
            usage = finished.usage
            if usage.reported:
                added_tokens = self.estimate.tokens(added)
                needed = usage.prompt + usage.output + added_tokens + self.limits.max_tokens
            else:  # the server said nothing: count the next request's bytes
                following = _request_bytes(self._request(view, tail, steps))
                needed = self.estimate.tokens(following) + self.limits.max_tokens
        raise AssertionError("unreachable")  # pragma: no cover

    def _no_room(self, turn_id: int | str, step: int, needed: int) -> Ending | None:
        """The turn's end when no call may be made: the step limit, or a call that would need
        more context than the budget (its estimate, `needed`, includes the output cap)."""
        if step == self.limits.max_steps:
            why = f"it reached {self.limits.max_steps} model calls"
            return self._end(turn_id, "max_steps", why)
        if needed > self.limits.context_budget:
            why = (
                f"the next call would need about {needed:,} tokens of context, more than "
                f"the {self.limits.context_budget:,} allowed; what was done is logged"
            )
            return self._end(turn_id, "context_full", why)
        return None

    def _deliver(self, turn_id: int | str, step: int, results: Message) -> Message:
        """The step's results with the messages held meanwhile added, each logged now."""
        extra: list[Part] = []
        for n, held in enumerate(self.take_held()):
            key = held.key or f"turn-{turn_id}-{step}-m{n}"
            names = self.images.save_all(held.images)
            self.log.append(held.kind, held.text, key=key, agent=held.agent, images=names)
            self.emit(events.Delivered(held.kind, held.text))
            extra += [Text(held.text), *held.images]
        return Message("user", [*results.parts, *extra])

    async def _answer(
        self, finished: Finished, step: _Step, turn_id: int | str
    ) -> Ending | list[Message]:
        """Act on the reply by its stop reason: the turn's end, or the messages that carry the
        turn on (the reply, then its tool results unless it was paused)."""
        if finished.stop == "refusal" or finished.cut_tool is not None:
            return await self._cut_short(finished, step, turn_id)
        if finished.stop in ("max_tokens", "context_window") and not finished.tool_uses:
            return await self._cut_short(finished, step, turn_id)
        results = await self._act(finished, step)  # whole tool calls run, whatever the stop
        reply = Message("assistant", _sendable(finished.parts))
        if results:
            return [reply, Message("user", results)]
        if finished.stop == "pause_turn":
            return self._resume(reply, step, turn_id)
        return Ending(events.TurnEnded("done"), "\n\n".join(step.replies))

    async def _cut_short(self, finished: Finished, step: _Step, turn_id: int | str) -> Ending:
        """A reply refused, or cut off by a limit: its texts are logged, none of its tool calls
        run (an input may be incomplete, or refused), and the turn ends saying why."""
        await self._act(finished, step, run=False)
        if finished.stop == "refusal":
            reason: events.EndReason = "refusal"
            why = "the model refused to go on (the provider ended the reply as a refusal)"
        elif finished.stop == "context_window":
            reason, why = "context_full", "the reply filled the model's context window"
        else:
            reason = "max_tokens"
            why = f"the reply reached the output limit of {self.limits.max_tokens:,} tokens"
        if finished.cut_tool is not None:
            why += f" in the middle of a call of {finished.cut_tool}, whose input is incomplete"
        if finished.cut_tool is not None or finished.tool_uses:
            why += "; its tool calls were not run"
        return self._end(turn_id, reason, why, "\n\n".join(step.replies))

    def _resume(self, reply: Message, step: _Step, turn_id: int | str) -> Ending | list[Message]:
        """A paused reply (Anthropic `pause_turn`) goes back as is, as the last message, and the
        model carries on from it; a request must end with a text block, though."""
        if reply.parts and isinstance(reply.parts[-1], Text):
            return [reply]
        why = "the provider paused the reply, and it ended with nothing to resume from"
        return self._end(turn_id, "error", why, "\n\n".join(step.replies))

    def view_room(self, opening: str, images: Sequence[Image] = ()) -> int:
        """The most bytes of rendered view the turn's first call can carry and still pass
        `_no_room`, by the same estimate, with this opening text and these images (negative:
        not even an empty view would). A chat that is behind has its view fitted to this
        before the turn starts, so that the turn never fails for it (SPEC §6.2)."""
        bare = _request_bytes(self._request("", [Text(opening), *images], []))
        allowed = self.limits.context_budget - self.limits.max_tokens  # tokens of prompt
        return self.estimate.bytes_for(allowed) - bare

    async def _call(self, request: Request, turn_id: int | str, step: _Step) -> Finished:
        call = Call(self.provider, request, self._meter(turn_id))
        try:
            finished = await call.run(lambda event: self._observed(event, step))
        except anyio.get_cancelled_exc_class():
            if call.answered:  # cancelled mid-stream (Ctrl+C): the input is billed all the same
                usage = step.streamed.usage(_request_bytes(request), self.estimate)
                call.record(usage, failed=True, estimated=True)
            raise
        usage = finished.usage
        if usage.reported:
            self.estimate.observe(_request_bytes(request), usage.prompt)
        cost = call.record(usage)
        self.emit(
            events.CallUsage(
                usage.input, usage.output, usage.cache_read, usage.cache_write, cost, usage.reported
            )
        )
        return finished

    def _meter(self, turn_id: int | str) -> Meter:
        """Where the turn's calls are accounted: the ledger, under its role and id, and the
        session's cost."""
        return Meter(self.role, self.ledger, turn=turn_id, on_cost=self.on_cost)

    def _observed(self, event: Event, step: _Step) -> None:
        """An event of the call: a try sent again is said to the user (the call has recorded
        it if it was billed), and starts the step afresh: what the failed try showed is
        replaced, and a cancel no longer logs it."""
        if isinstance(event, Retrying):
            step.streamed = Streamed()
            step.block.clear()
            step.unlogged.clear()
            self.emit(event)
            return
        step.streamed.observe(event)
        if not isinstance(event, Finished):
            self._streamed(event, step)

    def _streamed(self, event: Event, step: _Step) -> None:
        """Show a delta; keep a completed text block, shown and not logged: `_act` logs it
        once the stream has ended (the try may yet break off and be replaced)."""
        if isinstance(event, TextDelta):
            if event.text:
                step.block.append(event.text)
                self.emit(events.TextDelta(event.text))
        elif isinstance(event, ThinkingDelta):
            if event.text:
                self.emit(events.ThinkingDelta(event.text))
        elif isinstance(event, TextDone):
            step.block.clear()
            step.unlogged.append(event.text)

    def _reply(self, step: _Step, text: str) -> None:
        """Log a reply text as `ever` (a blank one is not logged)."""
        text = text.strip()
        if not text:
            return
        self.log.append("ever", text, key=f"{step.key}-{step.logged}")
        step.logged += 1
        step.replies.append(text)
        self.emit(events.ReplyLogged(text))

    async def _act(self, finished: Finished, step: _Step, *, run: bool = True) -> list[Part]:
        """Log the reply's texts and run its tool calls (unless `run` is False), in order: each
        text block before the first tool call as one message, the texts between two tool calls
        as one. Returns the results."""
        results: list[Part] = []
        texts: list[str] = []
        called = False  # a tool call came before
        # all of it was shown: a cancel while a tool runs logs the texts still to come
        step.unlogged[:] = [part.text for part in finished.parts if isinstance(part, Text)]
        step.block.clear()
        for part in finished.parts:
            if isinstance(part, Text) and not called:
                self._reply(step, part.text)
                del step.unlogged[:1]
            elif isinstance(part, Text):
                texts.append(part.text)
            elif isinstance(part, ToolUse):
                called = True
                self._reply(step, "".join(texts))
                del step.unlogged[: len(texts)]
                texts.clear()
                if run:
                    step.replies.clear()  # a subagent's report is what it says after its last call
                    results.append(await self._tool(part, step.key, step.logged))
                    step.logged += 2
        self._reply(step, "".join(texts))
        step.unlogged.clear()
        return results

    async def _tool(self, use: ToolUse, key: str, n: int) -> ToolResult:
        self.log.append("tool", tool_text(use.name, use.input), key=f"{key}-{n}")
        await _logged(self.log)  # the call is in the log before the tool acts
        self.emit(events.ToolStarted(use.id, use.name, use.input))
        self._running = (use.name, f"{key}-{n + 1}")
        asked_in = CALL_WORKDIR.set(self.context.workdir)  # what a question about it shows
        try:
            outcome = await self.toolbox.run(use.name, use.input, self.context)
        except Exception as error:  # a tool's bug becomes an error result the model reads
            outcome = ToolOutcome([Text(one_line(f"the tool failed: {error!r}"))], True)
        finally:
            CALL_WORKDIR.reset(asked_in)
        self._running = None
        content = list(outcome.content)
        if not any(isinstance(item, Text) and item.text for item in content):
            content.insert(0, Text(NO_OUTPUT))  # an API refuses an empty text block
            outcome = replace(outcome, content=content)
        logged = outcome.log_text(use.name)
        names = list(outcome.image_names) or self.images.save_all(outcome.images)
        failed = not outcome.succeeded
        self.log.append("echo", logged, key=f"{key}-{n + 1}", images=names or None, failed=failed)
        shown = logged.removeprefix(f"{use.name}: ")
        self.emit(events.ToolFinished(use.id, use.name, shown, outcome.is_error, failed))
        return ToolResult(use.id, content, is_error=outcome.is_error)


async def _logged(log: MessageLog) -> None:
    """Once what `log` was given is logged: a shared chat's turn log logs in the database's
    thread, in its own time (`shared_log.py`); the others have logged it already."""
    flushed = getattr(log, "flushed", None)
    if flushed is not None:
        await flushed()


def _sendable(parts: Sequence[Part]) -> list[Part]:
    """The reply as it goes back within the turn: thoughts (with their signatures), texts and
    tool calls in order; empty texts dropped (the API refuses them)."""
    return [part for part in parts if not (isinstance(part, Text) and not part.text)]


def _request_bytes(request: Request) -> int:
    """The bytes a request's tokens are estimated from: the system prompt, the tools, and
    every message (the view's blocks among them, byte for byte)."""
    size = sum(len(block.text.encode("utf-8", "surrogatepass")) for block in request.system)
    size += sum(
        len(compact_json(tool.input_schema)) + len(tool.description) for tool in request.tools
    )
    return size + sum(_bytes_of(message.parts) for message in request.messages)


def _bytes_of(parts: Sequence[Part]) -> int:
    size = 0
    for part in parts:
        if isinstance(part, Text):
            size += len(part.text.encode("utf-8", "surrogatepass"))
        elif isinstance(part, ToolResult):
            size += _bytes_of(part.content)
        elif isinstance(part, ToolUse):
            size += len(compact_json(part.input).encode("utf-8", "surrogatepass"))
        elif isinstance(part, Image):
            size += 1600 * BYTES_PER_TOKEN  # about what an API charges for a large image
    return size
