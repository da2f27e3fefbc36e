"""The Anthropic adapter: our Request to the Messages API and its event stream back.

Requests carry explicit `cache_control` marks exactly where the layout put them (SPEC §7). The
reply is streamed (`messages.create(stream=True)`) and accumulated here, so that every event is
seen and a stream that ends before `message_stop` is an error, never a short reply. Each text
block is announced whole (TextDone) at its `content_block_stop`, so that it can be logged before
the reply ends.
"""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import anthropic
import httpx2
from anthropic.types import (
    InputJSONDelta,
    RawContentBlockDeltaEvent,
    RawContentBlockStartEvent,
    RawContentBlockStopEvent,
    RawMessageDeltaEvent,
    RawMessageStartEvent,
    RawMessageStopEvent,
    RedactedThinkingBlock,
    SignatureDelta,
    TextBlock,
    ThinkingBlock,
    ToolUseBlock,
)
from anthropic.types import TextDelta as SdkTextDelta
from anthropic.types import ThinkingDelta as SdkThinkingDelta

from evertalk import secret_env

from .base import (
    CUT_SHORT,
    Event,
    Finished,
    Image,
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
from .relay import relay, sdk_timeout, tool_input
from .sdk_errors import ErrorMap, SdkErrors

if TYPE_CHECKING:
    from anthropic.types import RawMessageStreamEvent

EPHEMERAL: dict[str, str] = {"type": "ephemeral"}

MIN_THINKING_BUDGET = 1024
"""The smallest `budget_tokens` the Messages API accepts."""

THINKING_BUDGETS: dict[str, int] = {
    "minimal": MIN_THINKING_BUDGET,
    "low": 2048,
    "medium": 8192,
    "high": 16384,
    "xhigh": 32768,
    "max": 32768,
}
"""Manual extended thinking (`budget_tokens`) per effort, for models before adaptive thinking."""

ADAPTIVE_EFFORTS: dict[str, str] = {
    "minimal": "low",
    "low": "low",
    "medium": "medium",
    "high": "high",
    "xhigh": "xhigh",
    "max": "max",
}
"""`output_config.effort` per effort, for adaptive models. The API has no level below `low`, so
`minimal` asks for that."""

NO_THINKING = "none"
"""The effort that asks for no thinking (see `thinking_params`)."""

_STOP_REASONS: dict[str, StopReason] = {
    "end_turn": "end_turn",
    "tool_use": "tool_use",
    "max_tokens": "max_tokens",
    "model_context_window_exceeded": "context_window",
    "stop_sequence": "stop_sequence",
    "refusal": "refusal",
    "pause_turn": "pause_turn",
}

_VERSION = re.compile(r"claude-(?:[a-z]+-)?(\d+)(?:[-.](\d{1,2})(?!\d))?")


def uses_adaptive_thinking(model: str) -> bool:
    """Claude Opus/Sonnet 4.6 and every later model take `thinking: {"type": "adaptive"}` with
    `output_config.effort`; several of them answer 400 to a manual `budget_tokens`. Older models
    (Haiku 4.5, Sonnet 4.5, Opus 4.5, …) know only the manual budget."""
    name = model.lower().rsplit("/", 1)[-1]
    if "mythos" in name or "fable" in name:
        return True
    found = _VERSION.search(name)
    if found is None:
        return False
    version = (int(found.group(1)), int(found.group(2) or 0))
    return version >= (4, 6)


def thinking_params(
    model: str, effort: str | None, max_tokens: int, adaptive: bool | None = None
) -> dict[str, Any]:
    """`thinking` (and `output_config`, `max_tokens`) for an effort; empty when effort is None.

    Every effort of `config.EFFORTS` maps to a request the API accepts; an unknown one is a
    bad_request error before any call. `none` sends no `thinking` field, so a model whose
    thinking is off by default does not think. Several newer models think whatever the request
    says (and answer 400 to `{"type": "disabled"}`), so on adaptive models `none` also asks for
    the lowest effort.
    """
    if effort is None:
        return {}
    if adaptive if adaptive is not None else uses_adaptive_thinking(model):
        return _adaptive_params(effort)
    return _manual_params(effort, max_tokens)


def _adaptive_params(effort: str) -> dict[str, Any]:
    """Adaptive models get the effort as `output_config.effort` and summarized thoughts (some
    default to omitting them, and thoughts are shown to the user)."""
    if effort == NO_THINKING:
        return {"output_config": {"effort": "low"}}
    level = ADAPTIVE_EFFORTS.get(effort)
    if level is None:
        raise ProviderError("bad_request", f"unknown reasoning effort {effort!r}")
    return {
        "thinking": {"type": "adaptive", "display": "summarized"},
        "output_config": {"effort": level},
    }


def _manual_params(effort: str, max_tokens: int) -> dict[str, Any]:
    """Older models get a manual budget; `max_tokens` grows by it so that the reply keeps the
    room the caller asked for (the API wants it above the budget)."""
    if effort == NO_THINKING:
        return {}
    budget = THINKING_BUDGETS.get(effort)
    if budget is None:
        raise ProviderError("bad_request", f"unknown reasoning effort {effort!r}")
    return {
        "thinking": {"type": "enabled", "budget_tokens": budget},
        "max_tokens": max_tokens + budget,
    }


def request_params(request: Request, adaptive: bool | None = None) -> dict[str, Any]:
    """The Messages API body for a request (without `stream`)."""
    params: dict[str, Any] = {
        "model": request.model,
        "max_tokens": request.max_tokens,
    }
    if request.system:
        params["system"] = [_text_block(block.text, block.mark) for block in request.system]
    if request.tools:
        params["tools"] = [
            {"name": t.name, "description": t.description, "input_schema": t.input_schema}
            for t in request.tools
        ]
        if request.tool_choice == "none":
            params["tool_choice"] = {"type": "none"}
    params["messages"] = [
        {"role": message.role, "content": [_block(part) for part in message.parts]}
        for message in request.messages
    ]
    params.update(thinking_params(request.model, request.effort, request.max_tokens, adaptive))
    return params


def _text_block(text: str, mark: bool = False) -> dict[str, Any]:
    block: dict[str, Any] = {"type": "text", "text": text}
    if mark:
        block["cache_control"] = EPHEMERAL
    return block


def _image_block(image: Image) -> dict[str, Any]:
    block: dict[str, Any] = {
        "type": "image",
        "source": {"type": "base64", "media_type": image.media_type, "data": image.data},
    }
    if image.mark:
        block["cache_control"] = EPHEMERAL
    return block


def _block(part: Part) -> dict[str, Any]:
    if isinstance(part, Text):
        return _text_block(part.text, part.mark)
    if isinstance(part, Image):
        return _image_block(part)
    if isinstance(part, Thinking):
        if part.redacted:
            return {"type": "redacted_thinking", "data": part.signature}
        return {"type": "thinking", "thinking": part.text, "signature": part.signature}
    if isinstance(part, ToolUse):
        return {"type": "tool_use", "id": part.id, "name": part.name, "input": part.input}
    # blocks inside a tool result carry no marks of their own: the result's mark covers them
    content = [
        _text_block(item.text)
        if isinstance(item, Text)
        else _image_block(Image(item.media_type, item.data))
        for item in part.content
    ]
    block: dict[str, Any] = {
        "type": "tool_result",
        "tool_use_id": part.tool_use_id,
        "content": content,
    }
    if part.is_error:
        block["is_error"] = True
    if part.mark:
        block["cache_control"] = EPHEMERAL
    return block


# --- the stream ------------------------------------------------------------------------------


@dataclass
class _Block:
    kind: str  # "text" | "thinking" | "redacted" | "tool_use" | "other"
    text: list[str] = field(default_factory=list)
    signature: str = ""
    tool_id: str = ""
    name: str = ""
    json: list[str] = field(default_factory=list)
    initial_input: dict[str, Any] = field(default_factory=dict)
    done: bool = False  # a text block whose TextDone was sent


@dataclass
class _Reply:
    """The reply as it streams in; `feed` turns SDK events into ours."""

    blocks: dict[int, _Block] = field(default_factory=dict)
    model: str = ""
    stop: str | None = None
    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    started: bool = False
    finished: Finished | None = None

    def feed(self, event: RawMessageStreamEvent) -> list[Event]:
        if isinstance(event, RawMessageStartEvent):
            message = event.message
            self.model = message.model
            usage = message.usage
            self.input = usage.input_tokens
            self.output = usage.output_tokens
            self.cache_read = usage.cache_read_input_tokens or 0
            self.cache_write = usage.cache_creation_input_tokens or 0
            if self.started:
                return []
            self.started = True
            return [Started(self.usage())]
        if isinstance(event, RawContentBlockStartEvent):
            return self._start(event)
        if isinstance(event, RawContentBlockDeltaEvent):
            return self._delta(event)
        if isinstance(event, RawContentBlockStopEvent):
            return self._stop(event.index)
        if isinstance(event, RawMessageDeltaEvent):
            self.stop = event.delta.stop_reason or self.stop
            delta_usage = event.usage
            self.output = delta_usage.output_tokens
            if delta_usage.input_tokens is not None:
                self.input = delta_usage.input_tokens
            if delta_usage.cache_read_input_tokens is not None:
                self.cache_read = delta_usage.cache_read_input_tokens
            if delta_usage.cache_creation_input_tokens is not None:
                self.cache_write = delta_usage.cache_creation_input_tokens
            return []
        if isinstance(event, RawMessageStopEvent):
            # a text block the stream never stopped is complete all the same: announce it, as
            # every Text part of Finished must be
            texts = [done for index in sorted(self.blocks) for done in self._stop(index)]
            self.finished = self._finish()
            return [*texts, self.finished]
        return []  # an event type this code does not know

    def _start(self, event: RawContentBlockStartEvent) -> list[Event]:
        block = event.content_block
        if isinstance(block, TextBlock):
            self.blocks[event.index] = _Block("text", text=[block.text] if block.text else [])
            return [TextDelta(block.text)] if block.text else []
        if isinstance(block, ThinkingBlock):
            self.blocks[event.index] = _Block(
                "thinking",
                text=[block.thinking] if block.thinking else [],
                signature=block.signature,
            )
            return [ThinkingDelta(block.thinking)] if block.thinking else []
        if isinstance(block, RedactedThinkingBlock):
            self.blocks[event.index] = _Block("redacted", signature=block.data)
            return []
        if isinstance(block, ToolUseBlock):
            self.blocks[event.index] = _Block(
                "tool_use", tool_id=block.id, name=block.name, initial_input=dict(block.input)
            )
            return [ToolUseStarted()]
        self.blocks[event.index] = _Block("other")
        return []

    def _stop(self, index: int) -> list[Event]:
        """TextDone for a text block that has just ended (once; other blocks: nothing)."""
        block = self.blocks.get(index)
        if block is None or block.kind != "text" or block.done:
            return []
        block.done = True
        return [TextDone("".join(block.text))]

    def _delta(self, event: RawContentBlockDeltaEvent) -> list[Event]:
        block = self.blocks.get(event.index)
        if block is None:
            raise ProviderError("server", "the reply stream sent a delta for an unknown block")
        delta = event.delta
        if isinstance(delta, SdkTextDelta) and block.kind == "text":
            block.text.append(delta.text)
            return [TextDelta(delta.text)] if delta.text else []
        if isinstance(delta, SdkThinkingDelta) and block.kind == "thinking":
            block.text.append(delta.thinking)
            return [ThinkingDelta(delta.thinking)] if delta.thinking else []
        if isinstance(delta, SignatureDelta) and block.kind == "thinking":
            block.signature += delta.signature
            return []
        if isinstance(delta, InputJSONDelta) and block.kind == "tool_use":
            block.json.append(delta.partial_json)
            return []
        return []  # citations and deltas of blocks we do not keep

    def _finish(self) -> Finished:
        stop = _STOP_REASONS.get(self.stop or "", "other")
        # a stop that cuts the reply short can only have cut its last block
        last = max(self.blocks, default=-1) if stop in CUT_SHORT else None
        parts: list[Part] = []
        cut_tool: str | None = None
        for index in sorted(self.blocks):
            block = self.blocks[index]
            if block.kind == "tool_use":
                tool_input = _tool_input(block, cut=index == last)
                if tool_input is None:
                    cut_tool = block.name
                    continue
                parts.append(ToolUse(block.tool_id, block.name, tool_input))
            elif block.kind == "text":
                parts.append(Text("".join(block.text)))
            elif block.kind == "thinking":
                parts.append(Thinking("".join(block.text), block.signature))
            elif block.kind == "redacted":
                parts.append(Thinking("", block.signature, redacted=True))
        return Finished(parts, stop, self.usage(), self.model, cut_tool)

    def usage(self) -> Usage:
        return Usage(self.input, self.output, self.cache_read, self.cache_write)


def _tool_input(block: _Block, *, cut: bool) -> dict[str, Any] | None:
    """The call's input (see `tool_input`; `cut`: the reply stopped short in this block)."""
    raw = "".join(block.json)
    return tool_input(raw, block.name, cut=cut, empty=block.initial_input, what="input")


class AnthropicProvider:
    """The Provider over `anthropic.AsyncAnthropic` (SPEC §7: explicit cache marks)."""

    name = "anthropic"
    errors = SdkErrors(
        "Anthropic",
        anthropic.AnthropicError,
        anthropic.APIError,
        anthropic.APIStatusError,
        anthropic.APIConnectionError,
        anthropic.APITimeoutError,
        typed_kinds=True,
    )

    def __init__(
        self,
        api_key: str | None,
        base_url: str | None,
        *,
        http_client: httpx2.AsyncClient | None = None,
        max_retries: int = 0,
        timeout: float = 600,
        adaptive_thinking: bool | None = None,
    ) -> None:
        """`api_key` and `base_url` None: the SDK reads ANTHROPIC_API_KEY / ANTHROPIC_BASE_URL.
        `adaptive_thinking` None: chosen by the model name (`uses_adaptive_thinking`).
        `max_retries`: the SDK's own, off by default: `make_provider` wraps the adapter in a
        `retry.RetryingProvider`, the one retry policy, which also retries a cut stream and
        says so; the SDK's retries would come on top of it, silently."""
        self._client = anthropic.AsyncAnthropic(
            api_key=api_key,
            # sealed away from the environment the SDK would read it from (`secret_env`)
            auth_token=None if api_key else secret_env.kept("ANTHROPIC_AUTH_TOKEN"),
            base_url=base_url,
            http_client=http_client,
            max_retries=max_retries,
            timeout=sdk_timeout(timeout),
        )
        secrets = (api_key, self._client.api_key, self._client.auth_token)
        self._adaptive = adaptive_thinking
        self._mapped = ErrorMap(self.errors, str(self._client.base_url), secrets)

    def __repr__(self) -> str:
        return f"AnthropicProvider(base_url={str(self._client.base_url)!r})"

    def params(self, request: Request) -> dict[str, Any]:
        return request_params(request, self._adaptive)

    async def stream(self, request: Request) -> AsyncIterator[Event]:
        params = self.params(request)
        reply = _Reply()

        async def open_stream() -> Any:
            return await self._client.messages.create(**params, stream=True)

        def done() -> bool:
            return reply.finished is not None

        try:
            async for event in relay(open_stream, reply.feed, done, self._mapped):
                yield event
            if reply.finished is None:
                raise ProviderError("cut", "the reply stream ended before message_stop")
        except ProviderError as error:
            # a response that began was billed: the ledger records what it used so far
            error.usage = reply.usage() if reply.started else None
            raise

    async def aclose(self) -> None:
        await self._client.close()
