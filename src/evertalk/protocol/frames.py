"""Every frame of the protocol as a type, and the one way to read a line into one.

`ServiceFrame` is what a client reads (the events, the replies, the frames that come unasked);
`ClientFrame` is what the service reads (the hello and the requests). `decode_frame` and
`decode_request` turn a line into one of them or raise `FrameError`, a ProtocolError that says
in one line what was wrong and whether the line was no frame at all, a frame of a type this side
does not know (a client skips it), or a known frame with a field missing or wrong. `encode_frame`
writes a frame as `wire.encode` writes a dict: the same bytes.
"""

from __future__ import annotations

import re
from typing import Any, Final, Literal, get_args

import msgspec
from msgspec import UNSET

from evertalk.protocol import wire
from evertalk.protocol.events import AgentEvent, Event, MessageSent, Quiet, Recorded
from evertalk.protocol.replies import (
    Accepted,
    Appended,
    Ask,
    AskClosed,
    AskedElsewhere,
    Changed,
    Compact,
    Date,
    Error,
    ForgetPreview,
    Forgotten,
    Logged,
    Missed,
    Ok,
    Output,
    Records,
    Reopened,
    Status,
    Stopping,
    Undone,
    UndoPreview,
    Usage,
    View,
    Welcome,
    Zoom,
)
from evertalk.protocol.requests import (
    Answer,
    Append,
    Cancel,
    Command,
    Forget,
    GetCompact,
    GetDate,
    GetRecords,
    GetStatus,
    GetUsage,
    GetView,
    GetZoom,
    Hello,
    OutsideKind,
    Reopen,
    Retry,
    Send,
    Stop,
    Undo,
)

EventFrame = AgentEvent | MessageSent | Recorded | Quiet
"""Every event, as every client gets it."""

ReplyFrame = (
    Accepted
    | Ok
    | Status
    | Output
    | Records
    | View
    | Zoom
    | Date
    | Appended
    | Compact
    | Usage
    | ForgetPreview
    | Forgotten
    | UndoPreview
    | Undone
    | Error
)
"""What answers a request (an `error` may also come unasked, without an `rid`)."""

UnaskedFrame = (
    Welcome | Ask | AskClosed | AskedElsewhere | Reopened | Stopping | Missed | Logged | Changed
)
"""The service's frames that answer no request and are not events."""

ServiceFrame = EventFrame | ReplyFrame | UnaskedFrame
"""Whatever the service sends."""

RequestFrame = (
    Send
    | Retry
    | Cancel
    | GetStatus
    | Answer
    | Stop
    | Reopen
    | Command
    | GetRecords
    | GetView
    | GetZoom
    | GetDate
    | Append
    | GetCompact
    | GetUsage
    | Forget
    | Undo
)
"""The requests, after the hello."""

ClientFrame = Hello | RequestFrame
"""Whatever a client sends."""

Problem = Literal["not_a_frame", "unknown_type", "bad_fields"]


class FrameError(wire.ProtocolError):
    """A line that is not a frame of this protocol, in one line. `problem` says how:
    `not_a_frame` (not JSON, not an object with a string `type`, too long: the connection
    ends), `unknown_type` (a type this side does not know: a client skips it), `bad_fields` (a
    known type with a field missing or wrong). `frame_type` and `rid` are the line's, when it
    had them."""

    def __init__(
        self, message: str, problem: Problem, frame_type: str | None = None, rid: Any = UNSET
    ) -> None:
        super().__init__(message)
        self.problem: Problem = problem
        self.frame_type = frame_type
        self.rid = rid


def _tags(union: Any) -> frozenset[str]:
    return frozenset(str(cls.__struct_config__.tag) for cls in union.__args__)


_SERVICE_TAGS: Final = _tags(ServiceFrame)
_CLIENT_TAGS: Final = _tags(ClientFrame)
_service_decoder: Final = msgspec.json.Decoder(ServiceFrame)
_client_decoders: list[msgspec.json.Decoder[ClientFrame]] = []
"""The service's decoder of requests, made at its first: a client has no use for it."""


def decode_frame(line: bytes) -> ServiceFrame:
    """The service's frame on one line (without its newline); FrameError when it is none."""
    try:
        return _service_decoder.decode(line)
    except (msgspec.DecodeError, RecursionError):
        found: ServiceFrame = _explained(line, ServiceFrame, _SERVICE_TAGS, "frame")
        return found


def decode_request(line: bytes) -> ClientFrame:
    """A client's frame on one line (without its newline); FrameError when it is none. An
    unknown type says `unknown request 'frob'`; a wrong field starts with the request's type
    (`send: 'text'`, `zoom: id is a whole number, not '8'`)."""
    if not _client_decoders:
        _client_decoders.append(msgspec.json.Decoder(ClientFrame))
    try:
        return _client_decoders[0].decode(line)
    except (msgspec.DecodeError, RecursionError):
        found: ClientFrame = _explained(line, ClientFrame, _CLIENT_TAGS, "request")
        return found


def _explained(line: bytes, union: Any, tags: frozenset[str], noun: str) -> Any:
    """Decode again the slow way, to say what was wrong (FrameError), or the frame when only
    the fast way refused it (a number past 64 bits where any value goes)."""
    try:
        raw = wire.decode(line)
    except wire.ProtocolError as error:
        raise FrameError(str(error), "not_a_frame") from None
    kind, rid = raw["type"], raw.get("rid", UNSET)
    if kind not in tags:
        raise FrameError(f"unknown {noun} {kind!r}", "unknown_type", kind, rid)
    try:
        return msgspec.convert(raw, union)
    except msgspec.ValidationError as error:
        said = _said(str(error), raw, kind)
        raise FrameError(f"{kind}: {said}", "bad_fields", kind, rid) from None


_MISSING = re.compile(r"Object missing required field `(\w+)`( - at `.*`)?$")
_CHOICE = re.compile(r"Invalid enum value (.*) - at `\$.*\.(\w+)`$")
_CHOICES: Final = {"kind": get_args(OutsideKind)}  # an `append` message's
_WHOLE = re.compile(r"Expected `int`(?:, got `\w+`| >= 0) - at `\$\.(\w+)`$")
_COUNTED = frozenset({"records"})  # requests whose numbers are counts


def _said(message: str, raw: dict[str, Any], kind: str) -> str:
    """The validator's words, as the service has always said them for the usual mistakes."""
    missing = _MISSING.match(message)
    if missing is not None:
        return repr(missing.group(1))
    whole = _WHOLE.match(message)
    if whole is not None:
        name = whole.group(1)
        if kind in _COUNTED:
            return f"{raw[name]!r} is not a count"
        return f"{name} is a whole number, not {raw[name]!r}"
    choice = _CHOICE.match(message)
    if choice is not None and choice.group(2) in _CHOICES:
        name = choice.group(2)
        return f"{name} is one of {', '.join(_CHOICES[name])}, not {choice.group(1)}"
    return message.replace("\n", " ")


def encode_frame(frame: msgspec.Struct) -> bytes:
    """One frame's line, as `wire.encode` writes it. An event goes with the fields of its
    protocol class only (the providers' `Retrying` keeps its usage to itself)."""
    if isinstance(frame, Event):
        return encode_event(frame)
    builtins: dict[str, Any] = msgspec.to_builtins(frame)
    return wire.encode(builtins)


def encode_event(event: object) -> bytes:
    """An event's line; ValueError for what is no event of the protocol."""
    return wire.encode(wire.event_frame(event))


def to_dict(frame: msgspec.Struct) -> dict[str, Any]:
    """The frame as the JSON object it is on the wire (`-p --json` prints events so)."""
    if isinstance(frame, Event):
        return wire.event_frame(frame)
    builtins: dict[str, Any] = msgspec.to_builtins(frame)
    return builtins
