"""The frames the service sends besides events: the welcome, each request's reply, the error,
and the frames that come unasked (`ask`, `ask_closed`, `asked_elsewhere`, `reopened`,
`stopping`, and to a client that follows the log `missed`, `logged` and `changed`). Each is a
Struct tagged by its wire name in `type`; `rid` is the request's, copied as it came (UNSET, and
so absent, when the request had none). `docs/protocol.md` describes each;
`tests/protocol/test_protocol_doc.py` holds the two to the same fields."""

from __future__ import annotations

from typing import Any, Literal

import msgspec
from msgspec import UNSET, UnsetType

from evertalk.protocol.events import Behind
from evertalk.protocol.status import AgentStatus

ErrorKind = Literal[
    "peer",
    "version",
    "restart",
    "protocol",
    "bad_request",
    "not_ready",
    "nothing_to_retry",
    "nothing_to_undo",
    "over_budget",
    "busy",
    "command",
    "store",
    "too_large",
]
"""What an `error` frame is about: a client decides by this, never by the message's words."""


class Reply(msgspec.Struct, frozen=True, kw_only=True, tag_field="type"):
    """A frame of the service that is not an event."""


class Response(Reply, frozen=True, kw_only=True):
    """A request's reply: `rid` is the request's, as it came."""

    rid: Any = UNSET


class Welcome(Reply, frozen=True, tag="welcome"):
    protocol: int
    version: str
    pid: int
    home: str
    name: str  # as `sent` and `recorded` events name this client


class Error(Response, frozen=True, tag="error"):
    kind: ErrorKind
    message: str  # one line, for a person


class Accepted(Response, frozen=True, tag="accepted"):
    """A `send` (with `key`, and `held` unless a duplicate) or a `retry` (with `ids`)."""

    key: str | UnsetType | None = UNSET
    ids: list[int] | UnsetType = UNSET
    duplicate: bool = False
    held: bool | UnsetType = UNSET


class Ok(Response, frozen=True, tag="ok"):
    """A request done, with nothing to tell."""


class _StatusHead(AgentStatus, frozen=True):
    # the service's own fields, first on the wire, then the agent's
    pid: int
    version: str
    clients: int
    messages: int


class Status(_StatusHead, frozen=True, kw_only=True, tag_field="type", tag="status"):
    """The reply to `status`: the service's fields and the agent's (`AgentStatus`)."""

    rid: Any = UNSET

    @property
    def agent(self) -> AgentStatus:
        """The agent's part alone."""
        names = AgentStatus.__struct_fields__
        return AgentStatus(**{name: getattr(self, name) for name in names})


class Output(Response, frozen=True, tag="output"):
    texts: list[str]  # one row each


class RecordItem(msgspec.Struct, frozen=True, kw_only=True, omit_defaults=True):
    """A message of the log as `records` carries it; `failed` only when true, as in the log."""

    id: int
    kind: str
    text: str
    key: str | None
    date: str
    images: list[str]
    failed: bool = False


class Records(Response, frozen=True, tag="records"):
    t: int  # messages in the log
    records: list[RecordItem]


class View(Response, frozen=True, tag="view"):
    text: str


class Zoom(Response, frozen=True, tag="zoom"):
    text: str


class Date(Response, frozen=True, tag="date"):
    text: str


class Appended(Response, frozen=True, tag="appended"):
    ids: list[int]
    skipped: int


class Compact(Response, frozen=True, tag="compact"):
    left: int
    built: int
    calls: int
    cost: float
    rate: float | None
    error: str | None
    setup_error: str | None
    broken: str | None
    view_bytes: int
    merged_from: int | None
    catching_up: Behind | None


class Usage(Response, frozen=True, tag="usage"):
    ledger: str
    summary: dict[str, Any]
    table: str | None
    skipped: int
    error: str | None


class ForgetPreview(Response, frozen=True, tag="forget_preview"):
    lines: list[str]
    changes: int


class Forgotten(Response, frozen=True, tag="forgotten"):
    messages: int
    summaries: int


class UndoPreview(Response, frozen=True, tag="undo_preview"):
    turn: int
    lines: list[str]
    changes: int
    refused: list[str]


class Undone(Response, frozen=True, tag="undone"):
    turn: int
    restored: list[str]
    removed: list[str]
    refused: list[str]
    lines: list[str]


class Ask(Reply, frozen=True, tag="ask"):
    """A permission question, to one client. `exists` and `diff` come with some writes only."""

    id: str
    tool: str
    input: dict[str, Any]
    agent: str | None
    outside: bool
    exists: bool | UnsetType = UNSET
    diff: str | UnsetType = UNSET


class AskClosed(Reply, frozen=True, tag="ask_closed"):
    id: str


class AskedElsewhere(Reply, frozen=True, tag="asked_elsewhere"):
    id: str
    tool: str
    client: str  # the window asked, as its welcome named it


class Reopened(Reply, frozen=True, tag="reopened"):
    provider: str
    model: str
    base_url: str | None


class Stopping(Reply, frozen=True, tag="stopping"):
    pid: int
    reason: str
    on_purpose: bool


class Logged(Reply, frozen=True, tag="logged"):
    """To a client that follows the log (its hello had `since`): the messages logged since the
    last such frame, from `first` to `t`. Every event that came before it and showed one of
    them has come; `first` past the client's position means more were logged than one frame
    carries (the client reads the rest with `records`, or shows the last ones)."""

    t: int  # the log's position now: what the client has been sent
    first: int  # the id of the first record
    records: list[RecordItem]


class Missed(Logged, frozen=True, tag="missed"):
    """Right after the welcome, to a client whose hello had `since`: what was logged from
    there, before any event. `unanswered`: the last message has no reply, its turn cut short
    by a service that went (a crash, a stop), and no turn runs: `retry` answers it;
    `turning`: a turn runs, whose first events this client did not get."""

    unanswered: bool
    turning: bool
    edits: int = 0  # the in-place changes the client may count as applied (`changed` follows
    # with the others, when it said in its hello that it has applied fewer)


class Changed(Reply, frozen=True, tag="changed"):
    """To a client that follows the log: messages a forget or a redaction changed, as the log
    has them now (a forgotten one's text is its marker); a client drops what it showed of
    their old text. `edits`: the in-place changes applied once these are (its position)."""

    records: list[RecordItem]
    edits: int = 0
