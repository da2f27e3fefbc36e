"""A fake of OpenAI's `POST /v1/chat/completions`, streaming and not, for the real SDK.

    fake = OpenAIFake(chat("hi"), clock=FakeClock())
    client = openai_async(fake)  # in-process (base URL .../v1); or serve(fake) for loopback

Streams chunks as OpenAI does: a first chunk with the role, `delta.content` pieces,
`delta.tool_calls` in pieces (id, name, then argument fragments), `delta.reasoning_content` for
thoughts (as DeepSeek, vLLM and other OpenAI-compatible servers send them), a chunk with
`finish_reason`, with `stream_options.include_usage` a last chunk with empty `choices` and the
usage (`prompt_tokens_details.cached_tokens`), then `data: [DONE]`. Checks: bearer auth (401),
`model` and `messages` present, each tool message answers an open `tool_calls` id of the assistant
message before it and every such id is answered (400). The cache is cache.PrefixCache, per model
and `prompt_cache_key`. `records`/`totals` as for AnthropicFake (`input_tokens` = uncached
prompt tokens, `cache_read` = cached tokens, `cache_write` always 0).

Local servers (opt-in): with `context_window` set, a prompt over it (in the fake's tokens) gets
OpenAI's 400 `context_length_exceeded`, or with `overflow="empty"` (llama-cpp-python, which
fails only once the stream's response has begun) a streamed request gets a 200 with an empty
body. The behaviours `interrupted_by_next`, `without_stream_usage` and `refuses_null_content`
script the rest (see behaviours).

What a server serves (opt-in, for the setup form's connection test): with `models` set,
`GET /v1/models` lists those ids, each with vLLM's `max_model_len` where `max_model_len` names
it; with `props_n_ctx` set, `GET /props` (at the root, as llama.cpp has it) answers with
`default_generation_settings.n_ctx`. Unset, both are 404s, as before.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from typing import Any, Literal

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from .anthropic_fake import output_tokens
from .behaviours import Behaviour, Call, Fail, Reply, Text, Thinking, ToolCall, chat
from .cache import Clock, PrefixCache, PrefixPlan
from .common import (
    EventStreamResponse,
    Recorder,
    RequestRecord,
    StreamCut,
    Totals,
    canonical,
    pieces_of,
    sse,
    tokens_of,
)

FINISH = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "refusal": "content_filter",
}
ERRORS: dict[int, tuple[str, str | None, str]] = {
    429: ("requests", "rate_limit_exceeded", "Rate limit reached for requests."),
    500: (
        "server_error",
        None,
        "The server had an error while processing your request. Sorry about that!",
    ),
    503: ("server_error", None, "The engine is currently overloaded, please try again later."),
}
Overflow = Literal["error", "empty"]
NO_KEY = (
    "You didn't provide an API key. You need to provide your API key in an Authorization header "
    "using Bearer auth (i.e. Authorization: Bearer YOUR_KEY)."
)


def validate(body: dict[str, Any]) -> tuple[str, str | None, str | None] | None:
    """(message, param, code) of the 400 OpenAI gives for `body`, or None if it is accepted."""
    if "model" not in body:
        return "you must provide a model parameter", None, None
    messages = body.get("messages")
    if messages is None:
        return "Missing required parameter: 'messages'.", "messages", "missing_required_parameter"
    if not isinstance(messages, list) or not messages:
        return (
            "Invalid 'messages': empty array. Expected an array with minimum length 1, "
            "but got an empty array instead.",
            "messages",
            "empty_array",
        )
    open_ids: list[str] = []
    opened_at = -1
    for i, message in enumerate(messages):
        role = message.get("role") if isinstance(message, dict) else None
        if role == "tool":
            if message.get("tool_call_id") not in open_ids:
                return (
                    "Invalid parameter: messages with role 'tool' must be a response to a "
                    "preceeding message with 'tool_calls'.",
                    f"messages.[{i}].role",
                    None,
                )
            open_ids.remove(message["tool_call_id"])
            continue
        if open_ids:
            break
        if role == "assistant" and message.get("tool_calls"):
            open_ids = [call.get("id") for call in message["tool_calls"]]
            opened_at = i
    if open_ids:
        return (
            "An assistant message with 'tool_calls' must be followed by tool messages responding "
            "to each 'tool_call_id'. The following tool_call_ids did not have response messages: "
            + ", ".join(open_ids),
            f"messages.[{opened_at}].role",
            None,
        )
    return None


def render(body: dict[str, Any]) -> bytes:
    """The prompt as the prefix cache sees it: tools, then each message (role first)."""
    parts = [f"<tools>{canonical(body['tools'])}\n"] if body.get("tools") else []
    for message in body["messages"]:
        rest = {k: v for k, v in message.items() if k != "role"}
        parts.append(f"<|{message.get('role')}|>{canonical(rest)}\n")
    return "".join(parts).encode()


class OpenAIFake:
    def __init__(
        self,
        behaviour: Behaviour | None = None,
        *,
        clock: Clock = time.monotonic,
        min_cache_tokens: int = 1024,
        cache_step: int = 128,
        cache_ttl: float = 300.0,
        api_key: str | None = None,
        text_chunk: int = 24,
        json_chunk: int = 10,
        context_window: int | None = None,
        overflow: Overflow = "error",
        models: Sequence[str] | None = None,
        max_model_len: Mapping[str, int] | None = None,
        props_n_ctx: int | None = None,
    ) -> None:
        self.behaviour: Behaviour = behaviour if behaviour is not None else chat()
        self.cache = PrefixCache(clock, ttl=cache_ttl, min_tokens=min_cache_tokens, step=cache_step)
        self.api_key = api_key  # None: any bearer token is accepted
        self.text_chunk = text_chunk
        self.json_chunk = json_chunk
        self.context_window = context_window  # tokens; None: any prompt is taken
        self.overflow = overflow
        self.models = models  # None: no model list (404)
        self.max_model_len = dict(max_model_len or {})
        self.props_n_ctx = props_n_ctx  # None: no /props (404)
        self.recorder = Recorder()
        routes = [
            Route(path, self._completions, methods=["POST"])
            for path in ("/v1/chat/completions", "/chat/completions")
        ]
        if models is not None:
            routes += [Route(path, self._models) for path in ("/v1/models", "/models")]
        if props_n_ctx is not None:
            routes.append(Route("/props", self._props))
        self.app = Starlette(routes=routes)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app(scope, receive, send)

    @property
    def records(self) -> list[RequestRecord]:
        return self.recorder.records

    @property
    def totals(self) -> Totals:
        return self.recorder.totals

    def _error(
        self,
        record: RequestRecord,
        status: int,
        message: str = "",
        *,
        param: str | None = None,
        code: str | None = None,
        fail: Fail | None = None,
    ) -> Response:
        kind, default_code, default_message = ERRORS.get(
            status, ("server_error" if status >= 500 else "invalid_request_error", None, "Error")
        )
        error = {
            "message": message or default_message,
            "type": kind,
            "param": param,
            "code": code or default_code,
        }
        headers = {"x-request-id": f"req_fake{record.index:06d}"}
        if fail is not None and fail.retry_after_ms is not None:
            headers["retry-after-ms"] = str(fail.retry_after_ms)
            headers["retry-after"] = str(-(-fail.retry_after_ms // 1000))
        if fail is not None and fail.should_retry is not None:
            headers["x-should-retry"] = "true" if fail.should_retry else "false"
        record.status, record.error_type = status, kind
        return JSONResponse({"error": error}, status_code=status, headers=headers)

    async def _completions(self, request: Request) -> Response:
        raw = await request.body()
        headers = dict(request.headers)
        record = self.recorder.new(raw, headers)
        auth = headers.get("authorization", "")
        if not auth.startswith("Bearer ") or not auth[7:].strip():
            return self._error(record, 401, NO_KEY, code=None)
        if self.api_key is not None and auth[7:] != self.api_key:
            return self._error(record, 401, "Incorrect API key provided.", code="invalid_api_key")
        try:
            body = json.loads(raw)
        except ValueError:
            return self._error(record, 400, "We could not parse the JSON body of your request.")
        if not isinstance(body, dict):
            return self._error(record, 400, "We could not parse the JSON body of your request.")
        record.body = body
        problem = validate(body)
        if problem is not None:
            message, param, code = problem
            return self._error(record, 400, message, param=param, code=code)
        if (tokens := self._over_window(body)) is not None:
            return self._overflowed(record, tokens, bool(body.get("stream")))
        outcome = self.behaviour(Call("openai", body, record.index, headers))
        if isinstance(outcome, Fail):
            await anyio.sleep(outcome.delay)
            return self._error(record, outcome.status, outcome.message, fail=outcome)
        scope = f"{body['model']}\0{body.get('prompt_cache_key') or ''}"
        plan = self.cache.plan(scope, render(body))
        record.input_tokens = plan.prompt_tokens - plan.cached
        record.cache_read = plan.cached
        record.output_tokens = output_tokens(outcome.pieces)
        await anyio.sleep(outcome.delay)
        headers = {"x-request-id": f"req_fake{record.index:06d}"}
        if body.get("stream"):
            return EventStreamResponse(self._stream(record, plan, outcome, body), headers=headers)
        self.cache.commit(plan)
        record.started = record.finished = True
        return JSONResponse(self._completion(record, outcome, body["model"]), headers=headers)

    async def _models(self, request: Request) -> Response:
        """`GET /v1/models` as vLLM answers it (not recorded: no model is called). Only a fake
        given a key asks for it, as a local server started with `--api-key` does."""
        auth = request.headers.get("authorization", "")
        if self.api_key is not None and auth != f"Bearer {self.api_key}":
            error = {"message": "Unauthorized", "type": "invalid_request_error", "code": 401}
            return JSONResponse({"error": error}, status_code=401)
        data = []
        for model in self.models or ():
            entry: dict[str, Any] = {"id": model, "object": "model", "owned_by": "fake"}
            if model in self.max_model_len:
                entry["max_model_len"] = self.max_model_len[model]
            data.append({**entry, "created": int(time.time())})
        return JSONResponse({"object": "list", "data": data})

    async def _props(self, request: Request) -> Response:
        """llama.cpp's `GET /props`: the window each slot runs with, among other settings."""
        settings = {"n_ctx": self.props_n_ctx, "params": {"n_predict": -1}}
        return JSONResponse({"default_generation_settings": settings, "total_slots": 1})

    def _over_window(self, body: dict[str, Any]) -> int | None:
        """The prompt's tokens when they are more than the window holds (checked before the
        behaviour or the cache sees the request), else None."""
        if self.context_window is None:
            return None
        tokens = tokens_of(render(body))
        return tokens if tokens > self.context_window else None

    def _overflowed(self, record: RequestRecord, tokens: int, stream: bool) -> Response:
        """A prompt over the window: OpenAI's 400, or the empty 200 of a server that only finds
        out once its stream has begun (recorded as status 200, never started)."""
        if self.overflow == "empty" and stream:
            headers = {"x-request-id": f"req_fake{record.index:06d}"}
            return EventStreamResponse(_nothing(), headers=headers)
        message = (
            f"This model's maximum context length is {self.context_window} tokens. However, "
            f"your messages resulted in {tokens} tokens. Please reduce the length "
            "of the messages."
        )
        return self._error(record, 400, message, param="messages", code="context_length_exceeded")

    def _usage(self, record: RequestRecord, reply: Reply) -> dict[str, Any]:
        reasoning = sum(tokens_of(p.text) for p in reply.pieces if isinstance(p, Thinking))
        prompt = record.input_tokens + record.cache_read
        return {
            "prompt_tokens": prompt,
            "completion_tokens": record.output_tokens,
            "total_tokens": prompt + record.output_tokens,
            "prompt_tokens_details": {"cached_tokens": record.cache_read, "audio_tokens": 0},
            "completion_tokens_details": {
                "reasoning_tokens": reasoning,
                "audio_tokens": 0,
                "accepted_prediction_tokens": 0,
                "rejected_prediction_tokens": 0,
            },
        }

    def _tool_calls(self, record: RequestRecord, reply: Reply) -> list[dict[str, Any]]:
        calls = [p for p in reply.pieces if isinstance(p, ToolCall)]
        return [
            {
                "id": call.id or f"call_fake{record.index:05d}_{k}",
                "type": "function",
                "function": {"name": call.name, "arguments": json.dumps(call.input)},
            }
            for k, call in enumerate(calls)
        ]

    def _completion(self, record: RequestRecord, reply: Reply, model: str) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
        message["refusal"] = None
        if calls := self._tool_calls(record, reply):
            message["tool_calls"] = calls
        thoughts = "".join(p.text for p in reply.pieces if isinstance(p, Thinking))
        if thoughts:
            message["reasoning_content"] = thoughts
        choice = {"index": 0, "message": message, "logprobs": None}
        return {
            "id": f"chatcmpl-fake{record.index:06d}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model,
            "choices": [{**choice, "finish_reason": FINISH.get(reply.stop_reason, "stop")}],
            "usage": self._usage(record, reply),
            "system_fingerprint": "fp_fake",
        }

    def _timings(self, record: RequestRecord) -> dict[str, Any]:
        """A llama.cpp server's own counts: prompt tokens evaluated and taken from its cache,
        tokens generated, with times made up from them."""
        prompt, predicted = record.input_tokens, record.output_tokens
        return {
            "cache_n": record.cache_read,
            "prompt_n": prompt,
            "prompt_ms": prompt * 0.5,
            "predicted_n": predicted,
            "predicted_ms": predicted * 20.0,
        }

    def _chunks(
        self, record: RequestRecord, reply: Reply, body: dict[str, Any]
    ) -> Iterator[dict[str, Any] | str]:
        asked = bool((body.get("stream_options") or {}).get("include_usage"))
        include_usage = asked and reply.stream_usage == "usage"
        base = {
            "id": f"chatcmpl-fake{record.index:06d}",
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": body["model"],
            "system_fingerprint": "fp_fake",
        }
        extra = {"usage": None} if include_usage else {}

        def chunk(delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
            choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
            return {**base, "choices": [choice], **extra}

        yield chunk({"role": "assistant", "content": "", "refusal": None})
        calls = iter(self._tool_calls(record, reply))
        k = 0
        for piece in reply.pieces:
            if isinstance(piece, Thinking):
                for text in pieces_of(piece.text, self.text_chunk):
                    yield chunk({"reasoning_content": text})
            elif isinstance(piece, Text):
                for text in pieces_of(piece.text, self.text_chunk) if piece.text else []:
                    yield chunk({"content": text})
            else:
                call = next(calls)
                head = {**call, "function": {"name": piece.name, "arguments": ""}}
                yield chunk({"tool_calls": [{"index": k, **head}]})
                for part in pieces_of(call["function"]["arguments"], self.json_chunk):
                    yield chunk({"tool_calls": [{"index": k, "function": {"arguments": part}}]})
                k += 1
        last = chunk({}, FINISH.get(reply.stop_reason, reply.stop_reason))
        if reply.stream_usage == "timings":
            last["timings"] = self._timings(record)
        yield last
        if include_usage:
            yield {**base, "choices": [], "usage": self._usage(record, reply)}
        yield "[DONE]"

    async def _stream(
        self, record: RequestRecord, plan: PrefixPlan, reply: Reply, body: dict[str, Any]
    ) -> AsyncIterator[bytes]:
        for sent, data in enumerate(self._chunks(record, reply, body)):
            if reply.cut_after is not None and sent >= reply.cut_after:
                if reply.cut_mode == "error":
                    error = {"message": "The server had an error.", "type": "server_error"}
                    yield sse(None, {"error": {**error, "param": None, "code": None}})
                if reply.cut_mode == "done":
                    yield sse(None, "[DONE]")
                if reply.cut_mode == "abort":
                    raise StreamCut
                return
            if sent == 0:
                self.cache.commit(plan)
                record.started = True
            elif reply.chunk_delay:
                await anyio.sleep(reply.chunk_delay)
            if sent and reply.interruptible and self._newer_than(record):
                record.interrupted = True
                yield sse(None, "[DONE]")  # no finish_reason, no usage: stopped, not done
                return
            yield sse(None, data)
        record.finished = True

    def _newer_than(self, record: RequestRecord) -> bool:
        """Whether a request reached the fake after `record`'s."""
        return len(self.records) > record.index + 1


async def _nothing() -> AsyncIterator[bytes]:
    """An empty body: the response ends right after its headers."""
    chunks: tuple[bytes, ...] = ()
    for chunk in chunks:
        yield chunk
