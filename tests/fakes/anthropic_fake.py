"""A fake of Anthropic's `POST /v1/messages`, streaming (SSE) and not, for the real SDK.

    fake = AnthropicFake(summarizer(400), clock=FakeClock(), min_cache_tokens=1024)
    client = anthropic_async(fake)  # in-process; or with serve(fake) as url: anthropic_async(url)

The instance is an ASGI app. Requests are checked as the real API checks them (400
invalid_request_error: `model`/`max_tokens`/`messages` missing, more than 4 `cache_control`
blocks, roles not alternating or not starting with user, empty text, a `tool_use` without a
`tool_result` at the start of the very next message, a `tool_result` without its `tool_use`; 401
authentication_error without a key: `x-api-key`, or `Authorization: Bearer`, which is how the
SDK 2.x sends `api_key`; with `context_window` set, 400 invalid_request_error "prompt is too
long" for a prompt of more tokens than that, by the fake's token estimate, as the real API refuses
one over the model's window). The behaviour then scripts the reply (see behaviours),
and the prompt cache (see cache.BlockCache) sets the usage. `records` keeps every request (raw
bytes, parsed JSON, status, usage, started/finished); `totals` sums the usage of the answered ones.
"""

from __future__ import annotations

import json
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import anyio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route
from starlette.types import Receive, Scope, Send

from .behaviours import Behaviour, Call, Fail, Piece, Reply, Text, Thinking, ToolCall, chat
from .cache import Block, BlockCache, CachePlan, Clock
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

MAX_MARKS = 4

ERROR_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "billing_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    504: "timeout_error",
    529: "overloaded_error",
}
DEFAULT_MESSAGES = {
    429: "Number of request tokens has exceeded your per-minute rate limit.",
    500: "Internal server error",
    529: "Overloaded",
}


def count_marks(value: object) -> int:
    """The `cache_control` fields anywhere inside `value`."""
    if isinstance(value, dict):
        own = 1 if value.get("cache_control") is not None else 0
        return own + sum(count_marks(v) for k, v in value.items() if k != "cache_control")
    if isinstance(value, list):
        return sum(count_marks(v) for v in value)
    return 0


def _blocks_of(content: object) -> list[Any]:
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    return content if isinstance(content, list) else []


def _ids(content: object, kind: str, field: str) -> list[str]:
    blocks = _blocks_of(content)
    return [str(b.get(field)) for b in blocks if isinstance(b, dict) and b.get("type") == kind]


def validate(body: dict[str, Any]) -> str | None:
    """The message of the 400 the real API gives for `body`, or None if it would accept it."""
    for name in ("model", "max_tokens", "messages"):
        if name not in body:
            return f"{name}: Field required"
    if not isinstance(body["max_tokens"], int) or body["max_tokens"] < 1:
        return "max_tokens: Input should be greater than or equal to 1"
    messages = body["messages"]
    if not isinstance(messages, list) or not messages:
        return "messages: at least one message is required"
    marks = sum(count_marks(body.get(part)) for part in ("tools", "system", "messages"))
    if marks > MAX_MARKS:
        return f"A maximum of {MAX_MARKS} blocks with cache_control may be provided. Found {marks}."
    previous = None
    for i, message in enumerate(messages):
        role = message.get("role") if isinstance(message, dict) else None
        if role not in ("user", "assistant"):
            return f"messages.{i}.role: Input should be 'user' or 'assistant'"
        if i == 0 and role != "user":
            return 'messages: first message must use the "user" role'
        if role == previous:
            return (
                'messages: roles must alternate between "user" and "assistant", '
                f'but found multiple "{role}" roles in a row'
            )
        previous = role
        content = message.get("content")
        last_assistant = role == "assistant" and i == len(messages) - 1
        if content in ("", []) and not last_assistant:
            return (
                f"messages.{i}: all messages must have non-empty content except for "
                "the optional final assistant message"
            )
        for k, block in enumerate(_blocks_of(content)):
            if isinstance(block, dict) and block.get("type") == "text" and not block.get("text"):
                return f"messages.{i}.content.{k}.text: text content blocks must be non-empty"
    return _check_tool_pairs(messages)


def _leading_results(content: object) -> set[str]:
    """The ids answered by the tool_result blocks that open `content`: results after another
    kind of block do not count (the API wants the results first)."""
    ids: set[str] = set()
    for block in _blocks_of(content):
        if not isinstance(block, dict) or block.get("type") != "tool_result":
            break
        ids.add(str(block.get("tool_use_id")))
    return ids


def _check_tool_pairs(messages: list[dict[str, Any]]) -> str | None:
    for i, message in enumerate(messages):
        content = message.get("content")
        if message["role"] == "assistant":
            uses = _ids(content, "tool_use", "id")
            after = messages[i + 1].get("content") if i + 1 < len(messages) else None
            answered = _leading_results(after)
            missing = [u for u in uses if u not in answered]
            if missing:
                return (
                    f"messages.{i + 1}: `tool_use` ids were found without `tool_result` blocks "
                    f"immediately after: {', '.join(missing)}. Each `tool_use` block must have "
                    "a corresponding `tool_result` block in the next message."
                )
            continue
        before = messages[i - 1].get("content") if i > 0 else None
        used = set(_ids(before, "tool_use", "id"))
        for k, block in enumerate(_blocks_of(content)):
            if not isinstance(block, dict) or block.get("type") != "tool_result":
                continue
            if block.get("tool_use_id") not in used:
                return (
                    f"messages.{i}.content.{k}: unexpected `tool_use_id` found in "
                    f"`tool_result` blocks: {block.get('tool_use_id')}. Each `tool_result` "
                    "block must have a corresponding `tool_use` block in the previous message."
                )
    return None


def _block(head: str, block: object) -> Block:
    if not isinstance(block, dict):
        return Block(f"{head}|{canonical(block)}", tokens_of(canonical(block)), False)
    clean = {k: v for k, v in block.items() if k != "cache_control"}
    text = clean.get("text", clean.get("thinking"))
    tokens = tokens_of(text if isinstance(text, str) else canonical(clean))
    return Block(f"{head}|{canonical(clean)}", tokens, block.get("cache_control") is not None)


def prompt_blocks(body: dict[str, Any]) -> list[Block]:
    """The request as the cache sees it: tools, system blocks, message content blocks."""
    blocks = [_block("tool", tool) for tool in body.get("tools") or []]
    blocks += [_block("system", b) for b in _blocks_of(body.get("system"))]
    settings = canonical({"thinking": body.get("thinking"), "tool_choice": body.get("tool_choice")})
    for n, message in enumerate(body["messages"]):
        for k, b in enumerate(_blocks_of(message.get("content"))):
            head = f"{message['role']}|{'opens' if k == 0 else 'continues'}"
            blocks.append(_block(f"{head}|{settings}" if n == k == 0 else head, b))
    return blocks


def output_tokens(pieces: tuple[Piece, ...]) -> int:
    total = 0
    for piece in pieces:
        if isinstance(piece, ToolCall):
            total += tokens_of(canonical(piece.input)) + tokens_of(piece.name)
        else:
            total += tokens_of(piece.text)
    return max(total, 1)


class AnthropicFake:
    def __init__(
        self,
        behaviour: Behaviour | None = None,
        *,
        clock: Clock = time.monotonic,
        min_cache_tokens: int = 1024,
        cache_ttl: float = 300.0,
        lookback: int = 20,
        api_key: str | None = None,
        text_chunk: int = 24,
        json_chunk: int = 10,
        ping: bool = True,
        context_window: int | None = None,
    ) -> None:
        self.behaviour: Behaviour = behaviour if behaviour is not None else chat()
        self.context_window = context_window  # tokens; None: any prompt is taken
        self.cache = BlockCache(
            clock, ttl=cache_ttl, lookback=lookback, min_tokens=min_cache_tokens
        )
        self.api_key = api_key  # None: any x-api-key is accepted
        self.text_chunk = text_chunk
        self.json_chunk = json_chunk
        self.ping = ping
        self.recorder = Recorder()
        self.app = Starlette(routes=[Route("/v1/messages", self._messages, methods=["POST"])])

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.app(scope, receive, send)

    @property
    def records(self) -> list[RequestRecord]:
        return self.recorder.records

    @property
    def totals(self) -> Totals:
        return self.recorder.totals

    def _error(
        self, record: RequestRecord, status: int, message: str = "", fail: Fail | None = None
    ) -> Response:
        kind = ERROR_TYPES.get(status, "api_error" if status >= 500 else "invalid_request_error")
        request_id = f"req_fake{record.index:06d}"
        text = message or DEFAULT_MESSAGES.get(status, kind)
        body = {"type": "error", "error": {"type": kind, "message": text}, "request_id": request_id}
        headers = {"request-id": request_id}
        if fail is not None and fail.retry_after_ms is not None:
            headers["retry-after-ms"] = str(fail.retry_after_ms)
            headers["retry-after"] = str(-(-fail.retry_after_ms // 1000))
        if fail is not None and fail.should_retry is not None:
            headers["x-should-retry"] = "true" if fail.should_retry else "false"
        record.status, record.error_type = status, kind
        return JSONResponse(body, status_code=status, headers=headers)

    def _too_long(self, body: dict[str, Any]) -> str | None:
        """The real API's refusal of a prompt over the model's window, in the fake's tokens
        (those its usage reports), checked before the model or the cache sees the request."""
        if self.context_window is None:
            return None
        tokens = sum(block.tokens for block in prompt_blocks(body))
        if tokens <= self.context_window:
            return None
        return f"prompt is too long: {tokens} tokens > {self.context_window} maximum"

    async def _messages(self, request: Request) -> Response:
        raw = await request.body()
        headers = dict(request.headers)
        record = self.recorder.new(raw, headers)
        bearer = headers.get("authorization", "")
        key = headers.get("x-api-key") or (bearer[7:] if bearer.startswith("Bearer ") else None)
        if not key:
            return self._error(record, 401, "x-api-key header is required")
        if self.api_key is not None and key != self.api_key:
            return self._error(record, 401, "invalid x-api-key")
        try:
            body = json.loads(raw)
        except ValueError:
            return self._error(record, 400, "The request body is not valid JSON.")
        if not isinstance(body, dict):
            return self._error(record, 400, "The request body must be a JSON object.")
        record.body = body
        problem = validate(body) or self._too_long(body)
        if problem is not None:
            return self._error(record, 400, problem)
        outcome = self.behaviour(Call("anthropic", body, record.index, headers))
        if isinstance(outcome, Fail):
            await anyio.sleep(outcome.delay)
            return self._error(record, outcome.status, outcome.message, outcome)
        plan = self.cache.plan(body["model"], prompt_blocks(body))
        record.input_tokens, record.cache_read = plan.input, plan.read
        record.cache_write, record.output_tokens = plan.write, output_tokens(outcome.pieces)
        await anyio.sleep(outcome.delay)
        headers = {"request-id": f"req_fake{record.index:06d}"}
        if body.get("stream"):
            events = self._stream(record, plan, outcome, body["model"])
            return EventStreamResponse(events, headers=headers)
        self.cache.commit(plan)
        record.started = True
        message = self._message(record, outcome, body["model"])
        if outcome.cut_after is None:
            record.finished = True
            return JSONResponse(message, headers=headers)
        return EventStreamResponse(
            _half_then_cut(json.dumps(message).encode()),
            headers={**headers, "content-type": "application/json"},
        )

    def _usage(self, record: RequestRecord) -> dict[str, Any]:
        return {
            "input_tokens": record.input_tokens,
            "cache_creation_input_tokens": record.cache_write,
            "cache_read_input_tokens": record.cache_read,
            "cache_creation": {
                "ephemeral_5m_input_tokens": record.cache_write,
                "ephemeral_1h_input_tokens": 0,
            },
            "output_tokens": record.output_tokens,
            "service_tier": "standard",
        }

    def _content(self, record: RequestRecord, reply: Reply) -> list[dict[str, Any]]:
        content: list[dict[str, Any]] = []
        for i, piece in enumerate(reply.pieces):
            if isinstance(piece, Text):
                content.append({"type": "text", "text": piece.text})
            elif isinstance(piece, Thinking):
                block = {"type": "thinking", "thinking": piece.text, "signature": piece.signature}
                content.append(block)
            else:
                tool_id = piece.id or f"toolu_fake{record.index:05d}_{i}"
                block = {"type": "tool_use", "id": tool_id, "name": piece.name}
                content.append({**block, "input": piece.input})
        return content

    def _message(self, record: RequestRecord, reply: Reply, model: str) -> dict[str, Any]:
        return {
            "id": f"msg_fake{record.index:06d}",
            "type": "message",
            "role": "assistant",
            "model": model,
            "content": self._content(record, reply),
            "stop_reason": reply.stop_reason,
            "stop_sequence": None,
            "usage": self._usage(record),
        }

    def _events(
        self, record: RequestRecord, reply: Reply, model: str
    ) -> Iterator[tuple[str, dict[str, Any]]]:
        start = self._message(record, reply, model)
        start.update(content=[], stop_reason=None)
        start["usage"] = {**self._usage(record), "output_tokens": 1}
        yield "message_start", {"type": "message_start", "message": start}
        for i, block in enumerate(self._content(record, reply)):
            kind = block["type"]
            opening: dict[str, Any]
            deltas: list[dict[str, Any]]
            if kind == "text":
                opening = {"type": "text", "text": ""}
                texts = pieces_of(block["text"], self.text_chunk) if block["text"] else []
                deltas = [{"type": "text_delta", "text": t} for t in texts]
            elif kind == "thinking":
                opening = {"type": "thinking", "thinking": "", "signature": ""}
                texts = pieces_of(block["thinking"], self.text_chunk)
                deltas = [{"type": "thinking_delta", "thinking": t} for t in texts]
                deltas.append({"type": "signature_delta", "signature": block["signature"]})
            else:
                opening = {**block, "input": {}}
                texts = pieces_of(json.dumps(block["input"]), self.json_chunk)
                deltas = [{"type": "input_json_delta", "partial_json": t} for t in texts]
            yield (
                "content_block_start",
                {
                    "type": "content_block_start",
                    "index": i,
                    "content_block": opening,
                },
            )
            if i == 0 and self.ping:
                yield "ping", {"type": "ping"}
            for delta in deltas:
                event = {"type": "content_block_delta", "index": i, "delta": delta}
                yield "content_block_delta", event
            yield "content_block_stop", {"type": "content_block_stop", "index": i}
        usage = {k: v for k, v in self._usage(record).items() if k != "cache_creation"}
        delta = {"stop_reason": reply.stop_reason, "stop_sequence": None}
        yield "message_delta", {"type": "message_delta", "delta": delta, "usage": usage}
        yield "message_stop", {"type": "message_stop"}

    async def _stream(
        self, record: RequestRecord, plan: CachePlan, reply: Reply, model: str
    ) -> AsyncIterator[bytes]:
        for sent, (name, data) in enumerate(self._events(record, reply, model)):
            if reply.cut_after is not None and sent >= reply.cut_after:
                if reply.cut_mode == "error":
                    error = {"type": "overloaded_error", "message": "Overloaded"}
                    yield sse("error", {"type": "error", "error": error})
                if reply.cut_mode == "abort":
                    raise StreamCut
                return
            if name == "message_start":
                self.cache.commit(plan)
                record.started = True
            if sent and reply.chunk_delay:
                await anyio.sleep(reply.chunk_delay)
            yield sse(name, data)
        record.finished = True


async def _half_then_cut(data: bytes) -> AsyncIterator[bytes]:
    yield data[: len(data) // 2]
    raise StreamCut
