"""The OpenAI adapter: Chat Completions, for OpenAI and any compatible server (OpenRouter,
Ollama, llama.cpp server, vLLM) through `base_url`.

No explicit cache marks (SPEC §7): the stable layout lets automatic prefix caching work, and a
`prompt_cache_key` steers calls with the same prefix to the same cache. The user message's text
is sent as one string, the blocks concatenated exactly, so the prompt's bytes are the rendered
view followed by the tail whatever a server does with content parts.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any, Literal

import httpx2
import openai
from openai.types import CompletionUsage
from openai.types.chat import ChatCompletionChunk

from .base import (
    CUT_SHORT,
    Event,
    Finished,
    Image,
    Message,
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
    ToolResult,
    ToolUse,
    ToolUseStarted,
    Usage,
)
from .errors import cut_by_server
from .relay import relay, sdk_timeout, tool_input
from .sdk_errors import ErrorMap, SdkErrors

MaxTokensField = Literal["max_completion_tokens", "max_tokens"]

_FINISH_REASONS: dict[str, StopReason] = {
    "stop": "end_turn",
    "tool_calls": "tool_use",
    "function_call": "tool_use",
    "length": "max_tokens",
    "content_filter": "refusal",
}

_REASONING_FIELDS = ("reasoning_content", "reasoning")
"""Where compatible servers stream thoughts: `reasoning_content` (vLLM before 0.10, llama.cpp,
DeepSeek), `reasoning` (OpenRouter, Ollama, newer vLLM)."""


def request_params(
    request: Request,
    *,
    send_cache_key: bool = True,
    max_tokens_field: MaxTokensField = "max_completion_tokens",
    empty_content: bool = False,
) -> dict[str, Any]:
    """The Chat Completions body for a request (streaming, with usage in the last chunk).
    `empty_content`: see `chat_messages`."""
    params: dict[str, Any] = {
        "model": request.model,
        "messages": chat_messages(request, empty_content=empty_content),
        max_tokens_field: request.max_tokens,
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if request.tools:
        params["tools"] = [
            {
                "type": "function",
                "function": {
                    "name": t.name,
                    "description": t.description,
                    "parameters": t.input_schema,
                },
            }
            for t in request.tools
        ]
        # Said even when it is the API's default: llama-cpp-python's function-calling chat
        # formats leave the tools out of the prompt unless a tool_choice is given.
        params["tool_choice"] = "none" if request.tool_choice == "none" else "auto"
    if request.effort is not None:
        # evertalk's effort names are the API's own (none, minimal, … xhigh, max), so they go
        # as they are; which ones a model takes is the server's to say
        params["reasoning_effort"] = request.effort
    if request.cache_key and send_cache_key:
        params["prompt_cache_key"] = request.cache_key
    return params


def chat_messages(request: Request, *, empty_content: bool = False) -> list[dict[str, Any]]:
    """The messages of the body. `empty_content`: an assistant message that only calls tools
    gets `"content": ""` rather than null, which OpenAI documents but some compatible servers
    refuse (llama-cpp-python answers it with an HTTP 500)."""
    messages: list[dict[str, Any]] = []
    if request.system:
        messages.append({"role": "system", "content": "".join(b.text for b in request.system)})
    for message in request.messages:
        if message.role == "assistant":
            messages.append(_assistant(message, empty_content))
        else:
            messages.extend(_user(message))
    return messages


def _assistant(message: Message, empty_content: bool) -> dict[str, Any]:
    """Texts joined; thoughts dropped (Chat Completions takes none back); tool calls."""
    text = "".join(part.text for part in message.parts if isinstance(part, Text))
    calls = [
        {
            "id": part.id,
            "type": "function",
            "function": {"name": part.name, "arguments": _compact(part.input)},
        }
        for part in message.parts
        if isinstance(part, ToolUse)
    ]
    no_text = "" if empty_content else None
    out: dict[str, Any] = {"role": "assistant", "content": text if text or not calls else no_text}
    if calls:
        out["tool_calls"] = calls
    return out


def _user(message: Message) -> list[dict[str, Any]]:
    """Tool results as `tool` messages (they must follow the assistant's calls at once), then
    one user message with the texts and images, images of tool results included."""
    out: list[dict[str, Any]] = []
    rest: list[Text | Image] = []
    for part in message.parts:
        if isinstance(part, ToolResult):
            text = "".join(item.text for item in part.content if isinstance(item, Text))
            out.append({"role": "tool", "tool_call_id": part.tool_use_id, "content": text})
            rest.extend(item for item in part.content if isinstance(item, Image))
        elif isinstance(part, Text | Image):
            rest.append(part)
    if rest:
        out.append({"role": "user", "content": _content(rest)})
    return out


def _content(parts: list[Text | Image]) -> str | list[dict[str, Any]]:
    """One string when all is text; otherwise content parts, adjacent texts joined into one."""
    if all(isinstance(part, Text) for part in parts):
        return "".join(part.text for part in parts if isinstance(part, Text))
    content: list[dict[str, Any]] = []
    for part in parts:
        if isinstance(part, Text):
            if content and content[-1]["type"] == "text":
                content[-1]["text"] += part.text
            else:
                content.append({"type": "text", "text": part.text})
        else:
            url = f"data:{part.media_type};base64,{part.data}"
            content.append({"type": "image_url", "image_url": {"url": url}})
    return content


def _compact(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


# --- the stream ------------------------------------------------------------------------------


@dataclass
class _Call:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


@dataclass
class _Reply:
    started: bool = False
    model: str = ""
    text: list[str] = field(default_factory=list)  # the text run in progress
    runs: list[str] = field(default_factory=list)  # the text runs announced by TextDone
    thinking: list[str] = field(default_factory=list)
    calls: dict[int, _Call] = field(default_factory=dict)
    finish: str | None = None
    # unknown until the usage chunk comes: some compatible servers never send it, although
    # the request asks for it (`stream_options.include_usage`)
    usage: Usage = field(default_factory=lambda: Usage(reported=False))

    def feed(self, chunk: ChatCompletionChunk) -> list[Event]:
        events: list[Event] = []
        if not self.started:
            self.started = True
            events.append(Started())
        if chunk.model:
            self.model = chunk.model
        for choice in chunk.choices:
            if choice.index != 0:
                continue
            delta = choice.delta
            extra = delta.model_extra or {}
            thought = next(
                (extra[name] for name in _REASONING_FIELDS if isinstance(extra.get(name), str)),
                "",
            )
            if thought:
                self.thinking.append(thought)
                events.append(ThinkingDelta(thought))
            if delta.content:
                self.text.append(delta.content)
                events.append(TextDelta(delta.content))
            for call_delta in delta.tool_calls or []:
                if call_delta.index not in self.calls:
                    events += self.end_text()  # the text before a tool call is complete
                    events.append(ToolUseStarted())
                call = self.calls.setdefault(call_delta.index, _Call())
                if call_delta.id:
                    call.id = call_delta.id
                function = call_delta.function
                if function is not None:
                    if function.name:
                        call.name = function.name if not call.name else call.name
                    if function.arguments:
                        call.arguments.append(function.arguments)
            if choice.finish_reason:
                self.finish = choice.finish_reason
                events += self.end_text()
        if chunk.usage is not None:
            self.usage = _usage(chunk.usage)
        elif not self.usage.reported:
            self.usage = _timings_usage(chunk.model_extra) or self.usage
        return events

    def end_text(self) -> list[Event]:
        """TextDone for the text run in progress, if any. Chat Completions streams the reply's
        text as one run, normally over when a tool call or the finish_reason comes."""
        if not self.text:
            return []
        run = "".join(self.text)
        self.text.clear()
        self.runs.append(run)
        return [TextDone(run)]

    def finished(self) -> Finished:
        """The whole reply, once `end_text` has announced the last text run. Texts come before
        the tool calls: the API keeps no order between the two."""
        parts: list[Part] = []
        if self.thinking:
            parts.append(Thinking("".join(self.thinking)))
        parts += [Text(run) for run in self.runs]
        stop = _FINISH_REASONS.get(self.finish or "", "other")
        if stop == "end_turn" and self.calls:
            stop = "tool_use"  # some servers say "stop" after tool calls
        # a stop that cuts the reply short can only have cut its last call
        last = max(self.calls, default=-1) if stop in CUT_SHORT else None
        cut_tool: str | None = None
        for index in sorted(self.calls):
            call = self.calls[index]
            arguments = _arguments(call, cut=index == last)
            if arguments is None:
                cut_tool = call.name
            else:
                parts.append(ToolUse(call.id or f"call_{index}", call.name, arguments))
        return Finished(parts, stop, self.usage, self.model, cut_tool)


def _usage(usage: CompletionUsage) -> Usage:
    details = usage.prompt_tokens_details
    cached = (details.cached_tokens or 0) if details is not None else 0
    written = (details.cache_write_tokens or 0) if details is not None else 0
    prompt = usage.prompt_tokens or 0
    return Usage(
        input=max(0, prompt - cached - written),
        output=usage.completion_tokens or 0,
        cache_read=cached,
        cache_write=written,
    )


def _timings_usage(extra: dict[str, Any] | None) -> Usage | None:
    """The usage a llama.cpp server tells in its own `timings` (the last chunk of a stream),
    for when it sends no `usage`: `prompt_n` prompt tokens evaluated, `cache_n` taken from its
    cache, `predicted_n` generated. None when there are none, or they are not counts."""
    timings = (extra or {}).get("timings")
    if not isinstance(timings, dict) or not {"prompt_n", "predicted_n"} <= timings.keys():
        return None
    counts = [timings["prompt_n"], timings["predicted_n"], timings.get("cache_n", 0)]
    if not all(type(count) is int and count >= 0 for count in counts):  # not bool, not float
        return None
    prompt, predicted, cached = counts
    return Usage(input=prompt, output=predicted, cache_read=cached)


def _arguments(call: _Call, *, cut: bool) -> dict[str, Any] | None:
    """The call's arguments (see `tool_input`; `cut`: the reply stopped short in this call)."""
    raw = "".join(call.arguments)
    return tool_input(raw, call.name, cut=cut, empty={}, what="arguments")


def is_openai_api(base_url: str) -> bool:
    return httpx2.URL(base_url).host == "api.openai.com"


class OpenAIProvider:
    """The Provider over `openai.AsyncOpenAI` Chat Completions."""

    name = "openai"
    errors = SdkErrors(
        "OpenAI",
        openai.OpenAIError,
        openai.APIError,
        openai.APIStatusError,
        openai.APIConnectionError,
        openai.APITimeoutError,
    )

    def __init__(
        self,
        api_key: str | None,
        base_url: str | None,
        *,
        http_client: httpx2.AsyncClient | None = None,
        max_retries: int = 0,
        timeout: float = 600,
        send_cache_key: bool = True,
        max_tokens_field: MaxTokensField | None = None,
        empty_content: bool = False,
        name: str = "openai",
    ) -> None:
        """`api_key` and `base_url` None: the SDK reads OPENAI_API_KEY / OPENAI_BASE_URL.
        `max_tokens_field` None: `max_completion_tokens` for api.openai.com (its reasoning models
        refuse `max_tokens`), `max_tokens` for other servers (some know only that one).
        `empty_content`: send `""` for the content of an assistant message that only calls
        tools, where the server refuses null (local servers; see `chat_messages`).
        `name`: the provider kind for the ledger (openai, openrouter, ollama, …), and the
        server the error for a reply cut short names the settings of.
        `max_retries`: the SDK's own, off by default: `make_provider` wraps the adapter in a
        `retry.RetryingProvider`, the one retry policy, which also retries a cut stream and
        says so; the SDK's retries would come on top of it, silently."""
        self.name = name
        error: ProviderError | None = None
        try:
            self._client = openai.AsyncOpenAI(
                api_key=api_key,
                base_url=base_url,
                http_client=http_client,
                max_retries=max_retries,
                timeout=sdk_timeout(timeout),
            )
        except openai.OpenAIError:
            error = ProviderError("auth", "OpenAI: no API key is set (OPENAI_API_KEY)")
        if error is not None:
            raise error
        self._mapped = ErrorMap(
            self.errors, str(self._client.base_url), (api_key, self._client.api_key)
        )
        self._send_cache_key = send_cache_key
        self._empty_content = empty_content
        if max_tokens_field is None:
            official = is_openai_api(str(self._client.base_url))
            max_tokens_field = "max_completion_tokens" if official else "max_tokens"
        self._max_tokens_field: MaxTokensField = max_tokens_field

    def __repr__(self) -> str:
        return f"OpenAIProvider(base_url={str(self._client.base_url)!r})"

    def params(self, request: Request) -> dict[str, Any]:
        return request_params(
            request,
            send_cache_key=self._send_cache_key,
            max_tokens_field=self._max_tokens_field,
            empty_content=self._empty_content,
        )

    async def stream(self, request: Request) -> AsyncIterator[Event]:
        params = self.params(request)
        reply = _Reply()

        async def open_stream() -> Any:
            return await self._client.chat.completions.create(**params)

        try:
            async for event in relay(open_stream, reply.feed, lambda: False, self._mapped):
                yield event
            if reply.finish is None:
                # the body ended ([DONE], or just its end; or it was empty) and no finish reason
                # came: what local servers do when another request or the context stops them
                raise ProviderError("cut", cut_by_server(self.name))
        except ProviderError as error:
            # usage comes in the last chunk, so a broken stream has rarely reported any
            error.usage = reply.usage if reply.usage.reported else None
            raise
        for event in reply.end_text():  # text some server sent after its finish_reason
            yield event
        yield reply.finished()

    async def aclose(self) -> None:
        await self._client.close()
