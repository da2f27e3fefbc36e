"""Scripted model behaviours, shared by the Anthropic and the OpenAI fake.

A behaviour is a function from the request (a `Call`) to an outcome: a `Reply` (content pieces, a
stop reason, and optionally a delay, a pace and a cut) or a `Fail` (an HTTP error). The fakes turn
outcomes into their API's wire format, so one script serves both.

Composition: wrappers such as `slow`, `cut`, `with_head` and `fenced` take a behaviour and return
one; `fail(..., then=b)` errs N times per request then defers to `b`; `sequence` takes one
behaviour per call; `Script` routes calls by predicate, then by a queue of one-shot behaviours,
then to a default. `flaky` makes a server that fails some tries of each request (faults:
`overloaded`, `rate_limited`, `server_error`, `cut_at_start`, `dropped`, `error_event`,
`cut_in_text`) and answers the next.

Local servers' ways (OpenAI fake; opt-in, per reply): `interrupted_by_next` (a stream that a
newer request stops, ending with `[DONE]` and no finish reason, as llama-cpp-python's server
does), `without_stream_usage` (no usage in streams, or llama.cpp's own `timings` instead), and
`refuses_null_content` (an HTTP 500 validation error for a message whose content is null).
The fake's `context_window` models the fourth: an empty 200 for a prompt over the window.
"""

from __future__ import annotations

import hashlib
import re
from collections import deque
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any, Literal

from .common import canonical

Api = Literal["anthropic", "openai"]
CutMode = Literal["abort", "eof", "error", "done"]
StreamUsage = Literal["usage", "none", "timings"]


@dataclass(frozen=True)
class Text:
    text: str


@dataclass(frozen=True)
class Thinking:
    text: str
    signature: str = "fake-signature"


@dataclass(frozen=True)
class ToolCall:
    name: str
    input: dict[str, Any]
    id: str = ""  # empty: the fake makes one up


Piece = Text | Thinking | ToolCall


@dataclass(frozen=True)
class Reply:
    """A scripted reply.

    `delay`: seconds before the response starts (the cache entries it writes become readable only
    then). `chunk_delay`: seconds between streamed events. `cut_after`: the number of streamed
    events (message_start / first chunk included) sent before the stream is cut; `cut_mode` says
    how: "abort" drops the connection mid-body, "eof" ends the body cleanly without message_stop
    (OpenAI: without finish_reason, usage and [DONE]), "error" sends an SSE error event and ends,
    "done" (OpenAI) sends `data: [DONE]` without finish_reason or usage (Anthropic: as "eof").

    OpenAI fake only: `interruptible`: the stream stops as with "done" once a newer request has
    reached the fake; `stream_usage`: "usage" sends the usage chunk when the request asks for it,
    "none" never does, "timings" never does either but puts a llama.cpp server's own `timings`
    (prompt_n, cache_n, predicted_n) in the chunk with the finish_reason.
    """

    pieces: tuple[Piece, ...] = ()
    stop: str | None = None  # default: "tool_use" when a ToolCall is present, else "end_turn"
    delay: float = 0.0
    chunk_delay: float = 0.0
    cut_after: int | None = None
    cut_mode: CutMode = "abort"
    interruptible: bool = False
    stream_usage: StreamUsage = "usage"

    @property
    def stop_reason(self) -> str:
        if self.stop is not None:
            return self.stop
        return "tool_use" if any(isinstance(p, ToolCall) for p in self.pieces) else "end_turn"

    @property
    def text(self) -> str:
        return "".join(p.text for p in self.pieces if isinstance(p, Text))


def reply(*pieces: Piece | str, **options: Any) -> Reply:
    """`Reply` from pieces; a plain string is a `Text` piece."""
    parts = tuple(Text(p) if isinstance(p, str) else p for p in pieces)
    return Reply(pieces=parts, **options)


@dataclass(frozen=True)
class Fail:
    """An HTTP error reply in the API's own error shape.

    `retry_after_ms` sets `retry-after-ms` (and a rounded-up `retry-after`) so the SDKs retry at
    once; None sends no such header (the SDKs then back off for about half a second or more).
    """

    status: int
    message: str = ""
    retry_after_ms: int | None = 1
    should_retry: bool | None = None  # sets x-should-retry when not None
    delay: float = 0.0


Outcome = Reply | Fail


@dataclass(frozen=True)
class Call:
    """The request as a behaviour sees it; `body` is the parsed JSON as sent."""

    api: Api
    body: dict[str, Any]
    index: int  # position among all requests this fake has received, from 0
    headers: dict[str, str] = field(default_factory=dict)

    @property
    def model(self) -> str:
        return str(self.body.get("model", ""))

    @cached_property
    def turns(self) -> list[tuple[str, str]]:
        """(role, text) per message; tool results count as text of role user (OpenAI: tool)."""
        return [(str(m.get("role", "")), _text_of(m.get("content"))) for m in self._messages]

    @property
    def _messages(self) -> list[dict[str, Any]]:
        messages = self.body.get("messages")
        return [m for m in messages if isinstance(m, dict)] if isinstance(messages, list) else []

    @property
    def system_text(self) -> str:
        if self.api == "anthropic":
            return _text_of(self.body.get("system"))
        return "\n".join(t for r, t in self.turns if r in ("system", "developer"))

    @property
    def attempt(self) -> int:
        """1 + the assistant messages sent back: a follow-up in the same conversation is 2, ..."""
        return 1 + sum(1 for role, _ in self.turns if role == "assistant")

    @property
    def last_user_text(self) -> str:
        return next((t for r, t in reversed(self.turns) if r == "user"), "")

    @property
    def input_text(self) -> str:
        """The text between the last `<input>` and its `</input>` in the user messages, or ""."""
        for role, text in reversed(self.turns):
            if role == "user" and "<input>" in text:
                inner = text.rsplit("<input>", 1)[1]
                return inner.split("</input>", 1)[0].strip("\n")
        return ""

    @property
    def after_tool_result(self) -> bool:
        """The request ends with tool results (the model is to continue a tool loop)."""
        if not self._messages:
            return False
        last = self._messages[-1]
        if last.get("role") == "tool":
            return True
        content = last.get("content")
        return isinstance(content, list) and any(
            isinstance(b, dict) and b.get("type") == "tool_result" for b in content
        )

    @cached_property
    def key(self) -> str:
        """A digest of the request body: equal for an SDK's retries of one request."""
        return hashlib.sha256(canonical(self.body).encode()).hexdigest()


def _text_of(content: object) -> str:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        return ""
    out: list[str] = []
    for block in content:
        if isinstance(block, dict):
            if isinstance(block.get("text"), str):
                out.append(block["text"])
            elif block.get("type") == "tool_result":
                out.append(_text_of(block.get("content")))
    return "".join(out)


Behaviour = Callable[[Call], Outcome]
Length = int | Sequence[int] | Callable[[int], int]

_HEAD = re.compile(r"\d+\+\d+\|")


def sized_line(source: str, size: int) -> str:
    """A one-line text of exactly `size` UTF-8 bytes made of the words of `source`.

    Words repeat as needed; the line is cut at a character boundary and padded with `.`.
    `id+n|` heads in `source` are left out, so the line never starts with one by accident.
    """
    if size <= 0:
        return ""
    words = _HEAD.sub(" ", source).split() or ["summary"]
    parts: list[str] = []
    used = 0
    while used < size:
        word = words[len(parts) % len(words)]
        parts.append(word)
        used += len(word.encode()) + 1
    line = " ".join(parts).encode()[:size].decode("utf-8", "ignore").rstrip()
    return line + "." * (size - len(line.encode()))


def _length_for(length: Length, attempt: int) -> int:
    if isinstance(length, int):
        return length
    if callable(length):
        return length(attempt)
    return length[min(attempt, len(length)) - 1]


def chat(text: str = "Hello from the fake model.", *, thinking: str | None = None) -> Behaviour:
    """A plain reply (with a thought first when `thinking` is given)."""
    pieces: tuple[Piece, ...] = (Text(text),)
    if thinking is not None:
        pieces = (Thinking(thinking), *pieces)
    return lambda call: Reply(pieces=pieces)


def summarizer(length: Length = 400, *, thinking: str | None = None) -> Behaviour:
    """Writes a line of `length` bytes from the words of the request's `<input>`.

    `length` is a byte count, a list indexed by the attempt (1 = first try, 2 = the first
    follow-up in the same conversation, ...; the last entry repeats), or a function of the
    attempt. Length 0 gives an empty text reply.
    """

    def behave(call: Call) -> Outcome:
        line = sized_line(call.input_text or call.last_user_text, _length_for(length, call.attempt))
        pieces: tuple[Piece, ...] = (Text(line),) if line else ()
        if thinking is not None:
            pieces = (Thinking(thinking), *pieces)
        return Reply(pieces=pieces)

    return behave


def never_shortens(length: int = 900) -> Behaviour:
    """A summarizer that returns the same over-long line on every follow-up."""
    return summarizer(length)


def empty() -> Behaviour:
    """A reply with no content at all (end_turn)."""
    return lambda call: Reply()


def thinking_only(text: str = "Thinking about how to shorten this line...") -> Behaviour:
    """A reply that thinks and writes nothing."""
    return lambda call: Reply(pieces=(Thinking(text),))


def calls_tool(name: str, arguments: dict[str, Any], *, then: str = "Done.") -> Behaviour:
    """Calls tool `name` unless the request ends with tool results; then answers `then`."""

    def behave(call: Call) -> Outcome:
        if call.after_tool_result:
            return Reply(pieces=(Text(then),))
        return Reply(pieces=(Text("Let me check."), ToolCall(name, arguments)))

    return behave


def constant(outcome: Outcome) -> Behaviour:
    return lambda call: outcome


def by_request(call: Call) -> Hashable:
    return call.key


def fail(
    status: int,
    times: int | None = None,
    then: Behaviour | None = None,
    *,
    key: Callable[[Call], Hashable] = by_request,
    message: str = "",
    retry_after_ms: int | None = 1,
) -> Behaviour:
    """Answers HTTP `status` `times` times per key (default: per distinct request body, so an
    SDK's retries count), then defers to `then` (default `chat()`); `times=None`: always."""
    seen: dict[Hashable, int] = {}
    after = then if then is not None else chat()

    def behave(call: Call) -> Outcome:
        k = key(call)
        seen[k] = seen.get(k, 0) + 1
        if times is None or seen[k] <= times:
            return Fail(status, message=message, retry_after_ms=retry_after_ms)
        return after(call)

    return behave


def slow(seconds: float, inner: Behaviour, *, chunk_delay: float | None = None) -> Behaviour:
    """`inner`, answered `seconds` later (and, if given, `chunk_delay` between events)."""

    def behave(call: Call) -> Outcome:
        outcome = inner(call)
        if isinstance(outcome, Fail):
            return replace(outcome, delay=outcome.delay + seconds)
        pace = outcome.chunk_delay if chunk_delay is None else chunk_delay
        return replace(outcome, delay=outcome.delay + seconds, chunk_delay=pace)

    return behave


def cut(inner: Behaviour, after_events: int = 3, mode: CutMode = "abort") -> Behaviour:
    """`inner`'s reply with its stream cut after `after_events` events (see `Reply`)."""

    def behave(call: Call) -> Outcome:
        outcome = inner(call)
        if isinstance(outcome, Fail):
            return outcome
        return replace(outcome, cut_after=after_events, cut_mode=mode)

    return behave


def interrupted_by_next(inner: Behaviour) -> Behaviour:
    """`inner`'s reply, whose stream stops, with `[DONE]` and no finish_reason, when another
    request reaches the server while it streams: a llama-cpp-python server with its default
    `interrupt_requests`. Give the reply a pace (`slow`) so that it is still streaming then."""

    def behave(call: Call) -> Outcome:
        outcome = inner(call)
        return outcome if isinstance(outcome, Fail) else replace(outcome, interruptible=True)

    return behave


def without_stream_usage(inner: Behaviour, *, timings: bool = False) -> Behaviour:
    """`inner`'s reply streamed with no usage chunk, though the request asks for one (as
    llama-cpp-python's server does); `timings`: with a llama.cpp server's own counts in the
    finish chunk instead."""
    how: StreamUsage = "timings" if timings else "none"

    def behave(call: Call) -> Outcome:
        outcome = inner(call)
        return outcome if isinstance(outcome, Fail) else replace(outcome, stream_usage=how)

    return behave


NULL_CONTENT_ERROR = (
    "1 validation error for ChatCompletionRequestAssistantMessage\ncontent\n"
    "  Input should be a valid string [type=string_type, input_value=None, input_type=NoneType]"
)
"""The kind of text a pydantic-based server sends back for a null content (with an HTTP 500)."""


def refuses_null_content(inner: Behaviour | None = None) -> Behaviour:
    """A server that takes only strings as content: a request with a message whose `content`
    is null (an assistant message that only calls tools) gets an HTTP 500 whose body is a
    validation error, as llama-cpp-python's server answers; the others go to `inner`."""
    after = inner if inner is not None else chat()

    def behave(call: Call) -> Outcome:
        if any("content" in m and m["content"] is None for m in call._messages):
            return Fail(500, message=NULL_CONTENT_ERROR, retry_after_ms=None)
        return after(call)

    return behave


Fault = Callable[[Call, Behaviour], Outcome]
"""One failed try of a request: what the fake answers instead of what `inner` would."""


def overloaded(call: Call, inner: Behaviour) -> Outcome:
    """A 529 without `retry-after`: the client backs off on its own."""
    return Fail(529, retry_after_ms=None)


def rate_limited(call: Call, inner: Behaviour) -> Outcome:
    """A 429 that says when to come back (`retry-after-ms: 1`)."""
    return Fail(429)


def server_error(call: Call, inner: Behaviour) -> Outcome:
    return Fail(500, retry_after_ms=None)


def cut_at_start(call: Call, inner: Behaviour) -> Outcome:
    """The stream breaks off right after message_start (OpenAI: the first chunk), before any
    text: the response began, and nothing of the reply came."""
    return cut(inner, after_events=1)(call)


def dropped(call: Call, inner: Behaviour) -> Outcome:
    """The connection drops after the response's headers, before its first event."""
    return cut(inner, after_events=0)(call)


def error_event(call: Call, inner: Behaviour) -> Outcome:
    """An SSE error event (Anthropic: overloaded_error) right after the response began."""
    return cut(inner, after_events=1, mode="error")(call)


def cut_in_text(call: Call, inner: Behaviour) -> Outcome:
    """The stream breaks off in the middle of the reply's first text block (Anthropic: after
    message_start, content_block_start, ping and one delta; OpenAI: after two chunks)."""
    outcome = inner(call)
    after = 4 if call.api == "anthropic" else 2
    return outcome if isinstance(outcome, Fail) else replace(outcome, cut_after=after)


def flaky(
    inner: Behaviour,
    *patterns: Sequence[Fault],
    key: Callable[[Call], Hashable] = by_request,
) -> Behaviour:
    """Each distinct request (by `key`; by default its body, so a client's tries of one request
    count together) meets the faults of one pattern, one per try, then `inner`. The k-th
    distinct request, in order of arrival, takes pattern k (cycling): `flaky(chat(),
    (overloaded, cut_at_start), ())` fails the first try of every other request with a 529 and
    cuts its second after message_start; its third try, and every try of the others, is answered.
    """
    order: dict[Hashable, int] = {}
    tries: dict[Hashable, int] = {}
    cycle = [tuple(pattern) for pattern in patterns] or [()]

    def behave(call: Call) -> Outcome:
        k = key(call)
        pattern = cycle[order.setdefault(k, len(order)) % len(cycle)]
        done = tries.get(k, 0)
        tries[k] = done + 1
        if done < len(pattern):
            return pattern[done](call, inner)
        return inner(call)

    return behave


def _map_text(inner: Behaviour, change: Callable[[Call, str], str]) -> Behaviour:
    def behave(call: Call) -> Outcome:
        outcome = inner(call)
        if isinstance(outcome, Fail):
            return outcome
        pieces = tuple(
            Text(change(call, p.text)) if isinstance(p, Text) else p for p in outcome.pieces
        )
        return replace(outcome, pieces=pieces)

    return behave


def with_head(inner: Behaviour, head: str | None = None) -> Behaviour:
    """`inner`'s text with an `id+n|` head in front: `head`, or the first head in the input."""

    def change(call: Call, text: str) -> str:
        found = _HEAD.search(call.input_text)
        return (head or (found.group(0) if found else "0+1|")) + text

    return _map_text(inner, change)


def fenced(inner: Behaviour, lang: str = "") -> Behaviour:
    """`inner`'s text wrapped in a Markdown code fence."""
    return _map_text(inner, lambda call, text: f"```{lang}\n{text}\n```")


def sequence(*behaviours: Behaviour, then: Behaviour | None = None) -> Behaviour:
    """The k-th call (in arrival order) uses `behaviours[k]`; later calls use `then`
    (default: the last one)."""
    calls = [0]

    def behave(call: Call) -> Outcome:
        k = calls[0]
        calls[0] += 1
        if k < len(behaviours):
            return behaviours[k](call)
        return (then or behaviours[-1])(call)

    return behave


class Script:
    """A behaviour that picks another per call: the first route whose predicate holds, else the
    next queued one-shot behaviour, else the default. Outcomes may be given for behaviours."""

    def __init__(self, default: Behaviour | Outcome | None = None) -> None:
        self.default = _behaviour(default) if default is not None else chat()
        self.routes: list[tuple[Callable[[Call], bool], Behaviour]] = []
        self.queue: deque[Behaviour] = deque()
        self.calls: list[Call] = []

    def route(self, when: Callable[[Call], bool], behaviour: Behaviour | Outcome) -> Script:
        self.routes.append((when, _behaviour(behaviour)))
        return self

    def push(self, *behaviours: Behaviour | Outcome) -> Script:
        self.queue.extend(_behaviour(b) for b in behaviours)
        return self

    def __call__(self, call: Call) -> Outcome:
        self.calls.append(call)
        for when, behaviour in self.routes:
            if when(call):
                return behaviour(call)
        if self.queue:
            return self.queue.popleft()(call)
        return self.default(call)


def _behaviour(item: Behaviour | Outcome) -> Behaviour:
    if isinstance(item, Reply | Fail):
        return constant(item)
    return item
