"""Every frame of the protocol as a type, and the one way to read a line into one.

`ServiceFrame` is what a client reads (the events, the replies, the frames that come unasked);
`ClientFrame` is what the service reads (the hello and the requests). `decode_frame` and
`decode_request` turn a line into one of them or raise `FrameError`, a ProtocolError that says
in one line what was wrong and whether the line was no frame at all, a frame of a type this side
does not know (a client skips it), or a known frame with a field missing or wrong (named, with
what it should be). `encode_frame` writes a frame with msgspec, as `wire.encode` writes its dict.
"""

from __future__ import annotations

from types import UnionType
from typing import Any, Final, Literal, NamedTuple, Union, get_args, get_origin

import msgspec
from msgspec import UNSET

from evertalk.protocol import wire
from evertalk.protocol.events import Event, ProtocolEvent
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
    Count,
    Forget,
    GetCompact,
    GetDate,
    GetRecords,
    GetStatus,
    GetUsage,
    GetView,
    GetZoom,
    Hello,
    Reopen,
    Retry,
    Send,
    StartNow,
    Stop,
    Undo,
)

EventFrame = ProtocolEvent
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

NoticeFrame = Ask | AskClosed | AskedElsewhere | Reopened | Stopping
"""What the service tells a client unasked of a question or of itself."""

FollowerFrame = Missed | Logged | Changed
"""The log's frames, to a client that follows it."""

UnaskedFrame = Welcome | NoticeFrame | FollowerFrame
"""The service's frames that answer no request and are not events."""

ServiceFrame = EventFrame | ReplyFrame | UnaskedFrame
"""Whatever the service sends."""

RequestFrame = (
    Send
    | Retry
    | Cancel
    | StartNow
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


def _by_tag(union: Any) -> dict[str, type[msgspec.Struct]]:
    return {wire.frame_tag(cls): cls for cls in get_args(union)}


_SERVICE_TAGS: Final = _by_tag(ServiceFrame)
_CLIENT_TAGS: Final = _by_tag(ClientFrame)
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


def _explained(line: bytes, union: Any, classes: dict[str, type[msgspec.Struct]], noun: str) -> Any:
    """Decode again the slow way, to say what was wrong (FrameError), or the frame when only
    the fast way refused it (a number past 64 bits where any value goes)."""
    try:
        raw = wire.decode(line)
    except wire.ProtocolError as error:
        raise FrameError(str(error), "not_a_frame") from None
    kind, rid = raw["type"], raw.get("rid", UNSET)
    cls = classes.get(kind)
    if cls is None:
        raise FrameError(f"unknown {noun} {kind!r}", "unknown_type", kind, rid)
    try:
        return msgspec.convert(raw, union)
    except msgspec.ValidationError as error:
        fault = _fault(raw, cls)
        said = _said(fault) if fault is not None else _one_line(error)
        raise FrameError(f"{kind}: {said}", "bad_fields", kind, rid) from None


_ABSENT: Final = object()


class _Fault(NamedTuple):
    """A field of a frame that is missing (`value` is _ABSENT) or does not fit its type."""

    field: msgspec.structs.FieldInfo
    value: Any
    error: msgspec.ValidationError | None


def _fault(value: Any, cls: type[msgspec.Struct]) -> _Fault | None:
    """The first field of `value`, an object read as `cls`, that is missing or does not fit,
    down to the innermost object that holds it; None when each fits."""
    if not isinstance(value, dict):
        return None
    for field in msgspec.structs.fields(cls):
        if field.encode_name not in value:
            if field.required:
                return _Fault(field, _ABSENT, None)
            continue
        item = value[field.encode_name]
        try:
            msgspec.convert(item, field.type)
        except msgspec.ValidationError as error:
            return _inner(item, field.type) or _Fault(field, item, error)
    return None


def _inner(value: Any, hint: Any) -> _Fault | None:
    """The fault inside `value`, an object (or a list of them) of a Struct that `hint` holds."""
    items = value if isinstance(value, list) else [value]
    for struct in _structs(hint):
        for item in items:
            fault = _fault(item, struct)
            if fault is not None:
                return fault
    return None


def _structs(hint: Any) -> list[type[msgspec.Struct]]:
    """The Struct classes a type names: itself, its union's, its list's."""
    if get_origin(hint) is None and isinstance(hint, type) and issubclass(hint, msgspec.Struct):
        return [hint]
    return [struct for arg in get_args(hint) for struct in _structs(arg)]


def _said(fault: _Fault) -> str:
    """A field's fault in words from its type: `'text'` (missing), `id is a whole number, not
    '8'`, `start is a count, not -1`, `kind is one of user, …, not 'x'`; any other as the
    field's name and msgspec's words."""
    name, value = fault.field.encode_name, fault.value
    if value is _ABSENT:
        return repr(name)
    kinds = _members(fault.field.type)
    if Count in kinds:
        return f"{name} is a count, not {value!r}"
    if int in kinds:
        return f"{name} is a whole number, not {value!r}"
    choices = [
        str(choice) for kind in kinds if get_origin(kind) is Literal for choice in get_args(kind)
    ]
    if choices:
        return f"{name} is one of {', '.join(choices)}, not {value!r}"
    return f"{name}: {_one_line(fault.error)}"


def _members(hint: Any) -> list[Any]:
    """A union's types, or the one type."""
    return list(get_args(hint)) if get_origin(hint) in (Union, UnionType) else [hint]


def _one_line(error: BaseException | None) -> str:
    return str(error).replace("\n", " ")


def encode_frame(frame: msgspec.Struct) -> bytes:
    """One frame's line, as `wire.encode` writes its dict. An event goes with the fields of its
    protocol class only (the providers' `Retrying` keeps its usage to itself)."""
    if isinstance(frame, Event):
        return encode_event(frame)
    return wire.encode_struct(frame)


def encode_event(event: object) -> bytes:
    """An event's line; ValueError for what is no event of the protocol."""
    return wire.encode_struct(wire.protocol_event(event))


def to_dict(frame: msgspec.Struct) -> dict[str, Any]:
    """The frame as the JSON object it is on the wire (`-p --json` prints events so)."""
    if isinstance(frame, Event):
        return wire.event_frame(frame)
    builtins: dict[str, Any] = msgspec.to_builtins(frame)
    return builtins
