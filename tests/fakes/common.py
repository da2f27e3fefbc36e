"""Pieces shared by the fake servers: token counts, request records, a fake clock, SSE framing.

Token counts are a deterministic approximation, not a tokenizer: a text costs ceil(UTF-8 bytes / 4)
tokens (`tokens_of`). The fakes apply it per prompt block (Anthropic) or to the whole rendered
prompt (OpenAI), and to the reply's pieces for output tokens.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import anyio
from starlette.responses import Response
from starlette.types import Receive, Scope, Send


def tokens_of(data: str | bytes) -> int:
    """The fakes' token count: ceil(UTF-8 bytes / 4)."""
    size = len(data.encode() if isinstance(data, str) else data)
    return -(-size // 4)


def canonical(value: Any) -> str:
    """Stable JSON: sorted keys, no spaces, UTF-8 kept."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


class FakeClock:
    """A clock for the cache models (`clock=` of the fakes): time moves only with `advance`."""

    def __init__(self, start: float = 1_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


@dataclass
class RequestRecord:
    """One request a fake received, with what it answered and the usage it reported."""

    index: int
    raw: bytes
    headers: dict[str, str]
    body: dict[str, Any] | None = None
    status: int = 200
    error_type: str | None = None
    input_tokens: int = 0
    cache_read: int = 0
    cache_write: int = 0
    output_tokens: int = 0
    started: bool = False  # the response began: message_start / first chunk sent
    finished: bool = False  # the stream ended normally (message_stop / [DONE] sent)
    interrupted: bool = False  # a newer request stopped the stream (`interrupted_by_next`)


@dataclass(frozen=True)
class Totals:
    requests: int = 0
    input: int = 0
    cache_read: int = 0
    cache_write: int = 0
    output: int = 0

    @property
    def prompt(self) -> int:
        return self.input + self.cache_read + self.cache_write


@dataclass
class Recorder:
    """The request log of a fake, and its totals over the requests that got a reply."""

    records: list[RequestRecord] = field(default_factory=list)

    def new(self, raw: bytes, headers: dict[str, str]) -> RequestRecord:
        record = RequestRecord(index=len(self.records), raw=raw, headers=headers)
        self.records.append(record)
        return record

    @property
    def totals(self) -> Totals:
        done = [r for r in self.records if r.status == 200]
        return Totals(
            requests=len(done),
            input=sum(r.input_tokens for r in done),
            cache_read=sum(r.cache_read for r in done),
            cache_write=sum(r.cache_write for r in done),
            output=sum(r.output_tokens for r in done),
        )


class StreamCut(Exception):
    """Raised by an event generator to drop the connection: the response is left incomplete."""


class EventStreamResponse(Response):
    """Sends each chunk of `chunks` as its own ASGI body message, so the client sees it at once.

    When the generator raises `StreamCut`, the response is never completed: over a socket the
    server closes the connection mid-body, and the in-process transport raises as httpx2 would.
    """

    media_type = "text/event-stream"

    def __init__(self, chunks: AsyncIterator[bytes], *, headers: dict[str, str]) -> None:
        # Not Response.__init__: it would declare a Content-Length for an empty body.
        self.chunks = chunks
        self.status_code = 200
        self.background = None
        self.init_headers(headers)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async with anyio.create_task_group() as group:

            async def watch() -> None:  # stop sending once the client has gone
                while (await receive())["type"] != "http.disconnect":
                    pass
                group.cancel_scope.cancel()

            group.start_soon(watch)
            await self._send_all(send)
            group.cancel_scope.cancel()

    async def _send_all(self, send: Send) -> None:
        start = {"type": "http.response.start", "status": self.status_code}
        await send({**start, "headers": self.raw_headers})
        try:
            async for chunk in self.chunks:
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
        except StreamCut:
            return
        await send({"type": "http.response.body", "body": b"", "more_body": False})


def sse(event: str | None, data: dict[str, Any] | str) -> bytes:
    """One server-sent event; `event=None` leaves out the event line (OpenAI style)."""
    payload = data if isinstance(data, str) else json.dumps(data, ensure_ascii=False)
    head = f"event: {event}\n" if event is not None else ""
    return f"{head}data: {payload}\n\n".encode()


def pieces_of(text: str, size: int) -> list[str]:
    """`text` in consecutive slices of at most `size` characters (at least one slice)."""
    if not text:
        return [""]
    return [text[i : i + size] for i in range(0, len(text), size)]
