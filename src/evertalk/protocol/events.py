"""What a running agent tells its user interfaces (the terminal app, `-p`, any client of the
service): the events of the protocol, each named on the wire by its class's tag.

A UI consumes these in order; they carry everything it shows. Thoughts arrive as
ThinkingDelta and are never logged (SPEC §6.3). Nothing here imports the rest of evertalk: a
client that reads these never loads the agent, the providers or their SDKs.
"""

from __future__ import annotations

from typing import Any, Literal

import msgspec


class Event(msgspec.Struct, frozen=True, tag_field="type"):
    """An event of the protocol: its frame is its encoding, `type` its wire name (the tag)."""


class TextDelta(Event, frozen=True, tag="text_delta"):
    """A piece of the reply's text as the model streams it."""

    text: str


class ThinkingDelta(Event, frozen=True, tag="thinking_delta"):
    """A piece of the model's thoughts: shown, never logged."""

    text: str


class Retrying(Event, frozen=True, tag="retrying"):
    """A model call's last try failed with a transient error, and it is sent again after
    `delay` seconds, counted from this event (a client may count them down): try `attempt` of
    at most `of`. `why` is one line (`server overloaded (529)`). `replaces`: the failed try had
    begun its reply, and what it showed of it (text, thoughts) is replaced by the next try's;
    none of it was logged. The providers' own event adds what the failed try cost."""

    attempt: int
    of: int
    delay: float
    why: str
    replaces: bool = False

    @property
    def line(self) -> str:
        """`retrying (2/3) after 1.8 s: server overloaded (529)`, for the status and `-p`."""
        line = f"retrying ({self.attempt}/{self.of}) after {self.delay:.1f} s: {self.why}"
        return f"{line}; the reply starts over" if self.replaces else line


class Settling(Event, frozen=True, tag="settling"):
    """The turn waits for summaries before it starts (SPEC §6.1)."""

    unbuilt: int  # lines of the view still unbuilt


class Behind(msgspec.Struct, frozen=True):
    """How far the memory is behind, as the status and `compact` carry it (no tag: a field)."""

    to_go: int  # about how many summaries are still to be built before the view is whole
    eta_seconds: float | None  # about how long that takes at the recent pace; None: not known yet
    view_tokens: int | None = None  # about what the turn's view costs meanwhile (a turn's event)


class CatchingUp(Behind, Event, frozen=True, tag="catching_up"):
    """The chat is behind: the view is over its ceiling (or the turn model's window), and the
    turn waits for the summaries that bring it within (see `agent/catch_up.py`). Sent when the
    wait starts, then at most once a second while its figures change. The status's
    `catching_up` is the same figure: `to_go` has one meaning wherever it is shown."""


def catching_up_text(event: Behind) -> str:
    """`catching up: 1,204 summaries to go, about 3 min`, as the app and `-p` show it; from a
    turn, with what its view costs meanwhile: `; turns send about 21K tokens of view`."""
    text = f"catching up: {to_go(event.to_go)}, {about(event.eta_seconds)}"
    if event.view_tokens is not None:
        text += f"; turns send about {_thousands(event.view_tokens)} tokens of view meanwhile"
    return text


def _thousands(count: int) -> str:
    return f"{count / 1000:.0f}K" if count >= 10_000 else f"{count:,}"


def to_go(count: int) -> str:
    """`1,204 summaries to go`."""
    return f"{count:,} {'summary' if count == 1 else 'summaries'} to go"


def about(seconds: float | None) -> str:
    """`about 3 min`: whole minutes, hours from two of them; `estimating…` before a pace is
    known. Rounded, since it is only as good as the recent pace."""
    if seconds is None:
        return "estimating…"
    if seconds < 60:
        return "less than a minute"
    minutes = round(seconds / 60)
    if minutes < 120:
        return f"about {minutes} min"
    return f"about {round(minutes / 60)} h"


class TurnStarted(Event, frozen=True, tag="turn_started"):
    message_ids: list[int]  # the ids the turn's message(s) got in the log


class ReplyLogged(Event, frozen=True, tag="reply_logged"):
    """A reply text block completed and was logged as `ever`."""

    text: str


class ToolStarted(Event, frozen=True, tag="tool_started"):
    call_id: str
    name: str
    input: dict[str, Any]


class ToolFinished(Event, frozen=True, tag="tool_finished"):
    call_id: str
    name: str
    output: str  # as logged (clipped)
    is_error: bool  # the model was given an error result
    failed: bool = False  # the call failed: an error result, or a command that exited non-zero


class Delivered(Event, frozen=True, tag="delivered"):
    """A message typed during the turn (or a subagent's report) reached the model."""

    kind: Literal["user", "work"]
    text: str


EndReason = Literal[
    "done",
    "cancelled",
    "error",
    "context_full",  # the next call would not fit, or the reply filled the context window
    "max_steps",
    "max_tokens",  # the reply reached the output limit
    "refusal",  # the model refused to go on
]


class TurnEnded(Event, frozen=True, tag="turn_ended"):
    reason: EndReason
    error: str | None = None  # one line: why, for every reason but "done" and "cancelled"
    error_kind: str | None = None  # a failed model call's ProviderError kind ("auth", …)
    retry: bool = False  # its message is left without a reply: `/retry` would try it again


class CallUsage(Event, frozen=True, tag="call_usage"):
    """One model call of the turn finished: its cost, for the status bar. `reported` False:
    the server said nothing of its tokens (the zeros are unknown, not free)."""

    input: int
    output: int
    cache_read: int
    cache_write: int
    cost: float | None
    reported: bool = True


class MemoryWarning(Event, frozen=True, tag="memory_warning"):
    """Something the user should know about the summaries: a node's first failure (SPEC §4.5),
    a compactor that cannot use its model, or one that stopped and is restarted. One line,
    `memory: …`."""

    text: str


class ToolsUnused(Event, frozen=True, tag="tools_unused"):
    """The turn model was offered tools and called none in `turns` turns that ended normally
    with replies that tell of work done (a command run, a file read): it may have made that work
    up. Said once; never when `[turn] tools` is off. One line, `tools: …`."""

    turns: int
    text: str


class MessageSent(Event, frozen=True, tag="sent"):
    """A client sent a message, and the service logged it or holds it: every window shows it.
    `held`: a turn runs, and the message waits until the model takes it (`Delivered`) or the
    next turn starts with it (`TurnStarted`). `key` is the one the client sent it under: the
    sender knows its own message by it, as `text` is the log's (secrets replaced)."""

    text: str
    client: str  # which client sent it: `-p 4242`, `app 4250`
    held: bool
    images: int = 0  # images sent with it
    key: str | None = None  # None: sent without one, or by a service older than the field


class Recorded(Event, frozen=True, tag="recorded"):
    """A client logged messages from outside any turn: another agent's note, an import. With
    one message, its kind and text (a window shows it); with many, only how many."""

    client: str
    count: int
    kind: str | None = None
    text: str | None = None
    first: int | None = None  # another machine's messages: the first one's id


class Quiet(Event, frozen=True, tag="quiet"):
    """No turn runs, no message is held and no subagent works: a `-p` client may go."""


AgentEvent = (
    Settling
    | CatchingUp
    | TurnStarted
    | TextDelta
    | ThinkingDelta
    | ReplyLogged
    | ToolStarted
    | ToolFinished
    | Delivered
    | TurnEnded
    | CallUsage
    | MemoryWarning
    | ToolsUnused
    | Retrying
    | Recorded
)

ProtocolEvent = AgentEvent | MessageSent | Quiet
"""Every event of the protocol: the agent's, and the service's own. Each goes under its tag
(`wire.EVENT_NAMES`), and a client's app shows it (`tui/service_messages.py`)."""
