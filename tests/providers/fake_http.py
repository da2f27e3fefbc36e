"""Small in-process HTTP fakes for the adapter tests: an httpx2.MockTransport that records each
request and answers from a script of responses, and SSE builders in the real wire formats.

The real SDKs run on top (retries, SSE decoding, error classes); only the network is fake.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import httpx2

Answer = Callable[[httpx2.Request], httpx2.Response]


@dataclass
class Recorded:
    body: dict[str, Any]
    raw: bytes
    headers: dict[str, str]


@dataclass
class Script:
    """Answers requests in order from `answers` (the last one repeats)."""

    answers: list[Answer]
    requests: list[Recorded] = field(default_factory=list)

    def handler(self, request: httpx2.Request) -> httpx2.Response:
        raw = request.content
        self.requests.append(Recorded(json.loads(raw), raw, dict(request.headers)))
        answer = self.answers[min(len(self.requests) - 1, len(self.answers) - 1)]
        return answer(request)

    def client(self) -> httpx2.AsyncClient:
        return httpx2.AsyncClient(transport=httpx2.MockTransport(self.handler))


def sse(events: list[tuple[str | None, Any]]) -> bytes:
    """SSE frames: `event: name` (when given) and `data: json`."""
    out = []
    for name, data in events:
        text = data if isinstance(data, str) else json.dumps(data)
        frame = (f"event: {name}\n" if name else "") + f"data: {text}\n\n"
        out.append(frame)
    return "".join(out).encode()


def stream_answer(body: bytes, *, cut_with: Exception | None = None) -> Answer:
    """A 200 SSE response whose body streams in two pieces; with `cut_with`, the transport
    raises that error after the first piece (a connection dropped mid-stream)."""

    def answer(request: httpx2.Request) -> httpx2.Response:
        half = len(body) // 2

        async def chunks() -> AsyncIterator[bytes]:
            yield body[:half]
            if cut_with is not None:
                raise cut_with
            yield body[half:]

        return httpx2.Response(
            200, headers={"content-type": "text/event-stream"}, content=chunks(), request=request
        )

    return answer


def error_answer(
    status: int, body: dict[str, Any], headers: dict[str, str] | None = None
) -> Answer:
    def answer(request: httpx2.Request) -> httpx2.Response:
        return httpx2.Response(status, json=body, headers=headers or {}, request=request)

    return answer


# --- Anthropic Messages stream ---------------------------------------------------------------


def anthropic_usage(
    input_tokens: int = 10, output: int = 1, read: int = 0, write: int = 0
) -> dict[str, int]:
    return {
        "input_tokens": input_tokens,
        "output_tokens": output,
        "cache_read_input_tokens": read,
        "cache_creation_input_tokens": write,
    }


def anthropic_events(
    blocks: list[dict[str, Any]],
    *,
    stop: str = "end_turn",
    usage: dict[str, int] | None = None,
    output_tokens: int = 42,
    model: str = "claude-haiku-4-5",
    finish: bool = True,
) -> list[tuple[str | None, Any]]:
    """A whole Messages stream for content `blocks`, each given as the final block:
    {"type": "text", "text"}, {"type": "thinking", "thinking", "signature"},
    {"type": "redacted_thinking", "data"}, {"type": "tool_use", "id", "name", "input"}.
    Texts and thoughts arrive in two deltas each, tool input as partial JSON."""
    message: dict[str, Any] = {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": usage or anthropic_usage(),
    }
    events: list[tuple[str | None, Any]] = [
        ("message_start", {"type": "message_start", "message": message}),
        ("ping", {"type": "ping"}),
    ]
    for index, block in enumerate(blocks):
        kind = block["type"]
        start: dict[str, Any]
        deltas: list[dict[str, Any]]
        if kind == "text":
            start = {"type": "text", "text": ""}
            deltas = [{"type": "text_delta", "text": piece} for piece in _halves(block["text"])]
        elif kind == "thinking":
            start = {"type": "thinking", "thinking": "", "signature": ""}
            deltas = [
                {"type": "thinking_delta", "thinking": piece}
                for piece in _halves(block["thinking"])
            ]
            deltas.append({"type": "signature_delta", "signature": block["signature"]})
        elif kind == "redacted_thinking":
            start = {"type": "redacted_thinking", "data": block["data"]}
            deltas = []
        else:
            start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
            raw = json.dumps(block["input"])
            deltas = [{"type": "input_json_delta", "partial_json": piece} for piece in _halves(raw)]
        events.append(
            (
                "content_block_start",
                {"type": "content_block_start", "index": index, "content_block": start},
            )
        )
        for delta in deltas:
            events.append(
                (
                    "content_block_delta",
                    {"type": "content_block_delta", "index": index, "delta": delta},
                )
            )
        events.append(("content_block_stop", {"type": "content_block_stop", "index": index}))
    events.append(
        (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": output_tokens},
            },
        )
    )
    if finish:
        events.append(("message_stop", {"type": "message_stop"}))
    return events


def _halves(text: str) -> list[str]:
    half = len(text) // 2
    return [piece for piece in (text[:half], text[half:]) if piece]


# --- OpenAI Chat Completions stream ----------------------------------------------------------


def openai_chunk(
    delta: dict[str, Any] | None = None,
    finish: str | None = None,
    usage: dict[str, Any] | None = None,
    model: str = "gpt-5-mini",
) -> dict[str, Any]:
    chunk: dict[str, Any] = {
        "id": "chatcmpl-1",
        "object": "chat.completion.chunk",
        "created": 1,
        "model": model,
        "choices": [] if delta is None else [{"index": 0, "delta": delta, "finish_reason": finish}],
    }
    if usage is not None:
        chunk["usage"] = usage
    return chunk


def openai_events(
    chunks: list[dict[str, Any]], *, done: bool = True
) -> list[tuple[str | None, Any]]:
    events: list[tuple[str | None, Any]] = [(None, chunk) for chunk in chunks]
    if done:
        events.append((None, "[DONE]"))
    return events
