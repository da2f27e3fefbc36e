"""The provider interface: a request laid out in blocks, a stream of events back.

Everything the rest of evertalk knows about models goes through these types; the adapters
(anthropic.py, openai.py) translate them to and from the official SDKs, byte for byte
where the prompt cache depends on it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from evertalk.protocol import events
from evertalk.protocol.events import TextDelta as TextDelta
from evertalk.protocol.events import ThinkingDelta as ThinkingDelta

Role = Literal["user", "assistant"]


BYTES_PER_TOKEN = 3
"""A conservative bytes-per-token figure for estimating a request's size before it is sent
(English text runs about 4; code, JSON and non-ASCII text fewer)."""


@dataclass(frozen=True)
class Text:
    """A text block. `mark` puts a cache breakpoint at its end (Anthropic `cache_control`)."""

    text: str
    mark: bool = False


@dataclass(frozen=True)
class Image:
    media_type: str  # image/png, image/jpeg, image/gif, image/webp
    data: str  # base64
    mark: bool = False  # a cache breakpoint after the image (the end of a request can be one)


@dataclass(frozen=True)
class Thinking:
    """A thought: shown to the user, sent back within its turn as the API requires, never logged.

    A redacted thought (Anthropic `redacted_thinking`) has no text; its encrypted data is kept in
    `signature`.
    """

    text: str
    signature: str = ""
    redacted: bool = False


@dataclass(frozen=True)
class ToolUse:
    id: str
    name: str
    input: dict[str, Any]


@dataclass(frozen=True)
class ToolResult:
    tool_use_id: str
    content: list[Text | Image]
    is_error: bool = False
    mark: bool = False


Part = Text | Image | Thinking | ToolUse | ToolResult


@dataclass(frozen=True)
class Message:
    role: Role
    parts: list[Part]


@dataclass(frozen=True)
class Tool:
    name: str
    description: str
    input_schema: dict[str, Any]


@dataclass(frozen=True)
class Request:
    model: str
    system: list[Text]
    tools: list[Tool]
    messages: list[Message]
    max_tokens: int
    tool_choice: Literal["auto", "none"] = "auto"
    effort: str | None = None  # one of config.EFFORTS ("none" … "max"); None: the model's own
    cache_key: str | None = None  # OpenAI prompt_cache_key: stable per chat and role
    person_waits: bool = False  # a turn's call: tried again by the turns' policy (retry.py)


@dataclass(frozen=True)
class Usage:
    """One normalised usage record; `input` counts uncached input tokens only.

    `reported` False: the server never said what the call used (many OpenAI-compatible local
    servers send no usage), so the zeros are unknown, not free."""

    input: int = 0
    output: int = 0
    cache_read: int = 0
    cache_write: int = 0
    reported: bool = True

    def __add__(self, other: Usage) -> Usage:
        return Usage(
            self.input + other.input,
            self.output + other.output,
            self.cache_read + other.cache_read,
            self.cache_write + other.cache_write,
            self.reported and other.reported,
        )

    @property
    def prompt(self) -> int:
        return self.input + self.cache_read + self.cache_write


StopReason = Literal[
    "end_turn",
    "tool_use",
    "max_tokens",  # the output limit (OpenAI `length`)
    "context_window",  # the model's context window filled up (Anthropic)
    "stop_sequence",
    "refusal",  # the model or the provider's filter stopped the reply (OpenAI `content_filter`)
    "pause_turn",  # the provider paused a long turn: send the reply back as is to go on
    "other",
]

CUT_SHORT: frozenset[StopReason] = frozenset({"max_tokens", "context_window", "refusal"})
"""Stop reasons that can end a reply in the middle of a block, a tool call's input included."""


@dataclass(frozen=True)
class Started:
    """The response has begun (the prefix gate opens here, SPEC §4.6). `usage`: what the
    stream reported at its start, where it reports anything then (Anthropic's prompt tokens):
    a call cancelled later is billed for it (SPEC §1.8)."""

    usage: Usage | None = None


@dataclass(frozen=True)
class TextDone:
    """A text block of the reply is complete: its whole text, so that it can be logged before
    the reply ends (SPEC §6.3). Every Text part of the Finished that follows is announced by
    exactly one TextDone, in the same order, and before Finished."""

    text: str


@dataclass(frozen=True)
class ToolUseStarted:
    """A tool call has begun in the reply; its name and input come with Finished. Lets a
    consumer tell the texts before the first tool call from those after it."""


@dataclass(frozen=True)
class Finished:
    """The whole reply: its parts in order (thoughts, texts, tool calls), why it stopped, usage.

    `cut_tool` names a tool call whose input a CUT_SHORT stop broke off: it is left out of
    `parts`, since its input is incomplete and must never run."""

    parts: list[Part]
    stop: StopReason
    usage: Usage
    model: str = ""
    cut_tool: str | None = None

    @property
    def text(self) -> str:
        return "".join(part.text for part in self.parts if isinstance(part, Text))

    @property
    def tool_uses(self) -> list[ToolUse]:
        return [part for part in self.parts if isinstance(part, ToolUse)]


class Retrying(events.Retrying, frozen=True):
    """The protocol's event (a try sent again), with `usage`: what the failed try was billed
    for, when its response had begun (None otherwise), so that the caller's ledger keeps it."""

    usage: Usage | None = None


Event = Started | TextDelta | ThinkingDelta | TextDone | ToolUseStarted | Finished | Retrying

ErrorKind = Literal[
    "auth",
    "bad_request",
    "not_found",
    "rate_limit",
    "overloaded",
    "server",
    "connection",
    "timeout",
    "cut",
]


NOT_TRANSIENT_5XX: frozenset[int] = frozenset({501, 505})
"""Server errors that another try gets again: not implemented, HTTP version not supported."""


def is_transient(kind: ErrorKind, status: int | None) -> bool:
    """Whether another try of the call may well get through: a rate limit, an overloaded or
    failing server (429, 500–529, a 408 or 504 the server sent), an error event inside a reply
    stream, a stream cut off. Not a refused request (400s), a wrong key or model, nor a timeout
    of our own: the call already waited as long as it may."""
    if kind in ("rate_limit", "overloaded", "cut"):
        return True
    if status is None:
        return kind == "server"  # an error event in a stream that had begun: the server's
    if status in (408, 429):
        return True
    return 500 <= status <= 529 and status not in NOT_TRANSIENT_5XX


class ProviderError(Exception):
    """A model call that failed for good. The message is one line and never holds an API key.

    `usage`: what the provider had reported when a response that had begun failed (Anthropic
    reports the input and cache counts at the start; the output count so far is usually too
    low); None when nothing was reported, or the response never began.

    `transient`: whether another try may get through (None: judged from the kind and status by
    `is_transient`; an adapter says it where it knows better, such as a refused connection);
    `retry_after`: the seconds the server asked to wait before the next try, if it said."""

    def __init__(
        self,
        kind: ErrorKind,
        message: str,
        status: int | None = None,
        usage: Usage | None = None,
        *,
        transient: bool | None = None,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.status = status
        self.usage = usage
        self.transient = is_transient(kind, status) if transient is None else transient
        self.retry_after = retry_after


class Provider(Protocol):
    name: str  # the kind: "anthropic", "openai", or an OpenAI-compatible one ("openrouter", …)

    def stream(self, request: Request) -> AsyncIterator[Event]:
        """Yield Started once the response begins, deltas and block markers (TextDone,
        ToolUseStarted) as they come, Finished last.

        A stream that ends before its final event raises ProviderError("cut", …): a cut
        stream is an error, never a short reply. A provider that tries a call again
        (`retry.RetryingProvider`) yields Retrying between two tries, each of which may yield
        Started again.
        """
        ...

    async def aclose(self) -> None: ...


def _ignore(event: Event) -> None:
    """An observer that looks at nothing."""


async def collect(
    provider: Provider, request: Request, observe: Callable[[Event], None] = _ignore
) -> Finished:
    """The complete reply of one call; each event, the Finished included, goes to `observe` as
    it comes. A stream that ends without its Finished raises ProviderError("cut", …)."""
    finished: Finished | None = None
    async for event in provider.stream(request):
        observe(event)
        if isinstance(event, Finished):
            finished = event
    if finished is None:
        raise ProviderError("cut", "the reply stream ended before the reply was complete")
    return finished
