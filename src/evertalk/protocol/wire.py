"""The service's wire format, sans I/O: JSON lines, each one object with a `type`.

A frame is one JSON object on one line, at most MAX_FRAME bytes with its newline (a message may
carry images as base64). `FrameReader` takes bytes as they come and gives whole frames; a frame
too long, not JSON or not an object is a ProtocolError, after which the connection is closed.

Each frame crosses the wire under the tag its class declares (`EVENT_NAMES` gathers the
events'): renaming a class does not change the protocol. An event is encoded with the fields of
its protocol class only (the providers' `Retrying` adds what a failed try cost, which stays in
the service's ledger), and decoded leniently: a field the client does not know is dropped, a
frame type it does not know is skipped (`client/connection.read_frame`), so that a service a
minor version ahead still serves an older client.

The typed frames and their decoding are `frames.py` (`decode` here says what a line that is no
frame lacks; `encode_struct` writes a typed frame); `FrameReader.feed` gives the lines' dicts,
for tests that read frames as a peer would.
"""

from __future__ import annotations

import json
import math
from typing import Any, Final, get_args

import msgspec

from evertalk.protocol import events

PROTOCOL: Final = 2
"""Bumped on a change that an older peer would misread; the handshake compares it."""

MAX_FRAME: Final = 32 * 1024 * 1024
"""Bytes of one frame, its newline included: a message's images, base64, fit with room."""


class ProtocolError(Exception):
    """The peer sent what is not a frame of this protocol: one line, and the connection ends."""


def frame_tag(cls: type[msgspec.Struct]) -> str:
    """The wire name a frame class declares: its tag (`text_delta`)."""
    return str(cls.__struct_config__.tag)


EVENT_NAMES: Final[dict[str, type[events.Event]]] = {
    frame_tag(cls): cls for cls in get_args(events.ProtocolEvent)
}
_NAME_OF: Final = {cls: name for name, cls in EVENT_NAMES.items()}


_encoder: Final = msgspec.json.Encoder()


def encode_struct(frame: msgspec.Struct) -> bytes:
    """A typed frame's line, written by msgspec from the Struct: the bytes `encode` writes for
    its dict, the tag first and the fields in their order (a float past 1e16 or under 1e-4 may
    be spelled otherwise, `1e16` for `1e+16`: the same number). ProtocolError when too long."""
    try:
        data = _encoder.encode(frame) + b"\n"
    except UnicodeEncodeError:  # a lone surrogate: `encode` makes it U+FFFD
        return encode(msgspec.to_builtins(frame))
    return _within_limit(data)


def encode(frame: dict[str, Any]) -> bytes:
    """One frame: compact JSON and a newline. ProtocolError when it is too long.

    Strict JSON for peers in any language: a float that is not finite goes as null, and a
    lone surrogate (a file name's undecodable byte in a tool's output) as U+FFFD."""
    try:
        text = json.dumps(frame, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
    except ValueError:
        text = json.dumps(_finite(frame), ensure_ascii=False, separators=(",", ":"))
    try:
        data = text.encode("utf-8") + b"\n"
    except UnicodeEncodeError:
        data = text.encode("utf-8", "surrogatepass").decode("utf-8", "replace").encode() + b"\n"
    return _within_limit(data)


def _within_limit(data: bytes) -> bytes:
    if len(data) > MAX_FRAME:
        raise ProtocolError(f"a frame of {len(data):,} bytes is over the {MAX_FRAME:,} limit")
    return data


def _finite(value: object) -> object:
    """`value` with every float that is not finite made None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {key: _finite(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_finite(item) for item in value]
    return value


class FrameReader:
    """Whole frames out of bytes as they arrive; no frame may pass `limit` bytes with its
    newline."""

    def __init__(self, limit: int = MAX_FRAME) -> None:
        self._limit = limit
        self._buffer = bytearray()
        self._searched = 0  # bytes of the buffer known to hold no newline

    def feed(self, data: bytes) -> list[dict[str, Any]]:
        """The frames that `data` completes, in order."""
        return [decode(line) for line in self.lines(data)]

    def lines(self, data: bytes) -> list[bytes]:
        """The lines that `data` completes, in order, without their newlines, each within the
        limit (for `frames.decode_frame` or `decode_request`)."""
        self._buffer += data
        lines = []
        while (end := self._buffer.find(b"\n", self._searched)) >= 0:
            if end + 1 > self._limit:
                raise ProtocolError(f"a frame over the {self._limit:,}-byte limit")
            lines.append(bytes(self._buffer[:end]))
            del self._buffer[: end + 1]
            self._searched = 0
        self._searched = len(self._buffer)
        if len(self._buffer) >= self._limit:
            raise ProtocolError(f"a frame over the {self._limit:,}-byte limit")
        return lines


def decode(line: bytes) -> dict[str, Any]:
    """The object on one line (without its newline)."""
    try:
        value = json.loads(line.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise ProtocolError("a frame that is not JSON") from None
    if not isinstance(value, dict) or not isinstance(value.get("type"), str):
        raise ProtocolError("a frame that is not an object with a type")
    return value


def event_name(event: object) -> str:
    """The wire name of an event (of its protocol class, for a subclass)."""
    for cls in type(event).__mro__:
        name = _NAME_OF.get(cls)
        if name is not None:
            return name
    raise ValueError(f"{type(event).__name__} is not an event of the protocol")


def protocol_event(event: object) -> events.Event:
    """The event as its protocol class (for a subclass, without the fields it adds)."""
    cls = EVENT_NAMES[event_name(event)]
    if type(event) is cls and isinstance(event, events.Event):
        return event
    return cls(**{field: getattr(event, field) for field in cls.__struct_fields__})


def event_frame(event: object) -> dict[str, Any]:
    """`{"type": "text_delta", "text": "…"}`: the event as `-p --json` prints it."""
    name = event_name(event)
    fields = EVENT_NAMES[name].__struct_fields__
    body = {field: _plain(getattr(event, field)) for field in fields}
    return {"type": name, **body}


def _plain(value: object) -> object:
    if isinstance(value, msgspec.Struct | tuple):
        return msgspec.to_builtins(value)
    return value
