"""A Provider whose replies a test scripts, for the logic above the Provider interface (turns,
subagents, the compactor): no SDK, no HTTP. The adapters keep their HTTP fakes.

Each call to `stream` takes the next step of the script: a reply (texts, thoughts, tool calls,
a stop reason and usage), an error raised before or after the response began, or a stream cut
off before its end. A step may also be a function of the request. Every request is kept, in
order, in `requests`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

from evertalk.providers.base import (
    ErrorKind,
    Event,
    Finished,
    Part,
    ProviderError,
    Request,
    Started,
    StopReason,
    Text,
    TextDelta,
    TextDone,
    Thinking,
    ThinkingDelta,
    ToolUse,
    ToolUseStarted,
    Usage,
)

USAGE = Usage(10, 5)
"""The usage of a scripted reply that names none."""


@dataclass(frozen=True)
class Reply:
    """A complete reply: `stop` None is `tool_use` when it calls a tool, else `end_turn`."""

    parts: tuple[Part, ...]
    stop: StopReason | None = None
    usage: Usage = USAGE
    model: str | None = None  # None: the model the request named


@dataclass(frozen=True)
class Failure:
    """A call that fails with `error`; `begun`: after the response had begun (Started sent)."""

    error: ProviderError
    begun: bool = False


@dataclass(frozen=True)
class Cut:
    """A stream that ends after `text` without its Finished: a cut, never a short reply."""

    text: str = ""


Step = Reply | Failure | Cut | Callable[[Request], "Reply | Failure | Cut"]


class ScriptExhausted(Exception):
    """A call came after the last scripted step, and there is no default."""


def says(text: str, *, usage: Usage = USAGE, stop: StopReason | None = None) -> Reply:
    return Reply((Text(text),), stop, usage)


def thinks(thought: str, *, then: str, usage: Usage = USAGE) -> Reply:
    return Reply((Thinking(thought), Text(then)), None, usage)


def uses(
    name: str,
    tool_input: dict[str, Any] | None = None,
    *,
    text: str = "",
    id: str = "call-1",
    usage: Usage = USAGE,
) -> Reply:
    """A reply that calls tool `name`, after `text` if any."""
    call = ToolUse(id, name, dict(tool_input or {}))
    return Reply(((Text(text),) if text else ()) + (call,), None, usage)


def fails(
    kind: ErrorKind,
    message: str,
    status: int | None = None,
    *,
    begun: bool = False,
    usage: Usage | None = None,
) -> Failure:
    return Failure(ProviderError(kind, message, status, usage), begun)


def cut(text: str = "") -> Cut:
    return Cut(text)


class ScriptedProvider:
    """The Provider interface over a queue of scripted steps; see the module's docstring.
    `name` is the provider's kind (`anthropic` by default: its calls are priced)."""

    def __init__(self, *steps: Step, default: Step | None = None, name: str = "anthropic") -> None:
        self.script: deque[Step] = deque(steps)
        self.default = default
        self.name = name
        self.requests: list[Request] = []
        self.closed = False

    def queue(self, *steps: Step) -> ScriptedProvider:
        """Add steps after those already queued."""
        self.script.extend(steps)
        return self

    @property
    def pending(self) -> int:
        return len(self.script)

    async def stream(self, request: Request) -> AsyncIterator[Event]:
        self.requests.append(request)
        step = self._next()
        if callable(step):
            step = step(request)
        if isinstance(step, Failure):
            if step.begun:
                yield Started(step.error.usage)
            raise step.error
        yield Started()
        if isinstance(step, Cut):
            if step.text:
                yield TextDelta(step.text)
            raise ProviderError("cut", "the reply stream ended before the reply was complete")
        for event in _events(step, request):
            yield event

    async def aclose(self) -> None:
        self.closed = True

    def _next(self) -> Step:
        if self.script:
            return self.script.popleft()
        if self.default is None:
            raise ScriptExhausted(f"no scripted reply left for call {len(self.requests)}")
        return self.default


def _events(reply: Reply, request: Request) -> list[Event]:
    """The events after Started: deltas and block markers, Finished last."""
    events: list[Event] = []
    for part in reply.parts:
        if isinstance(part, Thinking):
            events.append(ThinkingDelta(part.text))
        elif isinstance(part, Text):
            events += [TextDelta(part.text), TextDone(part.text)]
        elif isinstance(part, ToolUse):
            events.append(ToolUseStarted())
    calls_tool = any(isinstance(part, ToolUse) for part in reply.parts)
    stop: StopReason = reply.stop or ("tool_use" if calls_tool else "end_turn")
    model = request.model if reply.model is None else reply.model
    events.append(Finished(list(reply.parts), stop, reply.usage, model))
    return events
