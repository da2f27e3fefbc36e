"""The wire codec (`protocol/wire.py`): events round-trip under their table names, frames
survive any cutting of the byte stream, and what is not a frame of the protocol is a
ProtocolError of one line."""

from __future__ import annotations

import inspect
import itertools
import json
import re
from typing import Any, get_args

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from budget import examples
from evertalk.protocol import events, frames, wire
from evertalk.protocol.wire import (
    EVENT_NAMES,
    MAX_FRAME,
    FrameReader,
    ProtocolError,
    decode,
    encode,
    event_frame,
    event_name,
)
from evertalk.providers import base

# One representative instance of every event of the protocol, under its wire name.
SAMPLES: dict[str, object] = {
    "settling": events.Settling(unbuilt=12),
    "catching_up": events.CatchingUp(to_go=1204, eta_seconds=183.5),
    "turn_started": events.TurnStarted(message_ids=[41, 42, 1_000_000]),
    "text_delta": events.TextDelta(text='Grüße, 世界 🌍 — "quoted"\nnext line\t\\'),
    "thinking_delta": events.ThinkingDelta(text="ponder: ∀x ∃y"),
    "reply_logged": events.ReplyLogged(text="done. ✓"),
    "tool_started": events.ToolStarted(
        call_id="toolu_01",
        name="bash",
        input={
            "command": "ls -la ~/été",
            "options": {"timeout": 30.5, "env": {"LANG": "C.UTF-8"}, "dry": False},
            "paths": ["a", "b/ç", None],
            "depth": 3,
        },
    ),
    "tool_finished": events.ToolFinished(
        call_id="toolu_01", name="bash", output="total 0\nnaïve.txt\n", is_error=True
    ),
    "delivered": events.Delivered(kind="work", text="the subagent's report: ok"),
    "turn_ended": events.TurnEnded(
        reason="error", error="server overloaded (529) — gave up", error_kind="overloaded"
    ),
    "call_usage": events.CallUsage(
        input=1200, output=340, cache_read=9000, cache_write=15, cost=0.0123, reported=False
    ),
    "memory_warning": events.MemoryWarning(text="memory: the compactor restarted"),
    "tools_unused": events.ToolsUnused(turns=3, text="tools: none called in 3 turns"),
    "retrying": events.Retrying(attempt=2, of=3, delay=1.8, why="server overloaded (529)"),
    "sent": events.MessageSent(text="and one more thing…", client="-p 4242", held=True),
    "recorded": events.Recorded(client="mcp 4242", count=1, kind="note", text="keep 8"),
    "quiet": events.Quiet(),
}


def round_trip(event: object) -> object | None:
    """The event as the other side reads it: framed, encoded, the line read as its frame."""
    data = encode(event_frame(event))
    assert data.endswith(b"\n") and data.count(b"\n") == 1
    return frames.decode_frame(data[:-1])


def assert_one_line(error: BaseException) -> None:
    message = str(error)
    assert message.strip() and "\n" not in message, repr(message)


# -- the table of events --------------------------------------------------------------------


def test_the_samples_cover_the_table() -> None:
    assert set(SAMPLES) == set(EVENT_NAMES)
    for name, event in SAMPLES.items():
        assert type(event) is EVENT_NAMES[name], name


@pytest.mark.parametrize("name", sorted(SAMPLES))
def test_every_event_round_trips(name: str) -> None:
    event = SAMPLES[name]
    frame = event_frame(event)
    assert frame["type"] == name == event_name(event)
    back = round_trip(event)
    assert type(back) is type(event)
    assert back == event


def test_an_event_with_defaults_left_out_round_trips() -> None:
    for event in (
        events.TurnEnded(reason="done"),
        events.CatchingUp(to_go=1, eta_seconds=None),
        events.CallUsage(input=0, output=0, cache_read=0, cache_write=0, cost=None),
    ):
        assert round_trip(event) == event


def test_non_ascii_text_goes_out_as_utf8_not_escapes() -> None:
    data = encode(event_frame(events.TextDelta(text="é世🌍")))
    assert "é世🌍".encode() in data
    assert b"\\u" not in data


def test_the_table_covers_every_event_class() -> None:
    expected = set(get_args(events.AgentEvent)) | {
        events.MessageSent,
        events.Recorded,
        events.Quiet,
    }
    assert set(EVENT_NAMES.values()) == expected
    # and no event of the events module is left out of the protocol
    defined = {
        cls
        for _, cls in inspect.getmembers(events, inspect.isclass)
        if issubclass(cls, events.Event) and cls.__module__ == events.__name__
    }
    defined.discard(events.Event)
    assert defined == expected


def test_names_are_unique_and_snake_case() -> None:
    classes = list(EVENT_NAMES.values())
    assert len(set(classes)) == len(classes), "two names for one class"
    for name in EVENT_NAMES:
        assert re.fullmatch(r"[a-z]+(_[a-z]+)*", name), name


# -- the providers' Retrying ----------------------------------------------------------------


def test_the_providers_retrying_is_framed_without_its_usage() -> None:
    usage = base.Usage(input=1500, output=20, cache_read=300, cache_write=0)
    event = base.Retrying(attempt=2, of=4, delay=2.5, why="rate limited (429)", usage=usage)
    frame = event_frame(event)
    assert frame == {
        "type": "retrying",
        "attempt": 2,
        "of": 4,
        "delay": 2.5,
        "why": "rate limited (429)",
        "replaces": False,
    }
    assert "usage" not in frame
    back = round_trip(event)
    assert type(back) is events.Retrying
    assert back == events.Retrying(attempt=2, of=4, delay=2.5, why="rate limited (429)")


def test_a_subclass_of_an_event_goes_under_its_protocol_name() -> None:
    class Louder(events.TextDelta, frozen=True):
        volume: int = 11

    event = Louder(text="hi")
    assert event_name(event) == "text_delta"
    assert event_frame(event) == {"type": "text_delta", "text": "hi"}


# -- FrameReader ----------------------------------------------------------------------------

FIXED_FRAMES: list[dict[str, Any]] = [
    {"type": "text_delta", "text": "é世🌍"},
    {"type": "ping"},
    {"type": "x", "nested": {"list": [1, 2.5, None, True], "s": "a\nb"}, "n": -7},
    {"type": "quiet"},
]


def test_frames_cut_at_every_byte_boundary_come_out_whole() -> None:
    data = b"".join(encode(frame) for frame in FIXED_FRAMES)
    for cut in range(len(data) + 1):
        reader = FrameReader()
        got = reader.feed(data[:cut]) + reader.feed(data[cut:])
        assert got == FIXED_FRAMES, cut


def test_frames_fed_one_byte_at_a_time_come_out_whole_and_on_time() -> None:
    reader = FrameReader()
    got: list[dict[str, Any]] = []
    for frame in FIXED_FRAMES:
        data = encode(frame)
        for i in range(len(data) - 1):
            assert reader.feed(data[i : i + 1]) == []
        got += reader.feed(data[-1:])
        assert got[-1] == frame
    assert got == FIXED_FRAMES
    assert reader.feed(b"") == []


json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=12),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3)
    ),
    max_leaves=8,
)
frames_strategy = st.builds(
    lambda kind, rest: {**rest, "type": kind},
    st.text(max_size=12),
    st.dictionaries(st.text(max_size=6), json_values, max_size=3),
)


@settings(max_examples=examples(100), deadline=None)
@given(frames=st.lists(frames_strategy, max_size=6), data=st.data())
def test_frames_cut_anywhere_come_out_the_same(
    frames: list[dict[str, Any]], data: st.DataObject
) -> None:
    stream = b"".join(encode(frame) for frame in frames)
    cuts = sorted(data.draw(st.lists(st.integers(0, len(stream)), max_size=12), label="cuts"))
    bounds = [0, *cuts, len(stream)]
    reader = FrameReader()
    got: list[dict[str, Any]] = []
    for start, end in itertools.pairwise(bounds):
        got += reader.feed(stream[start:end])
    assert got == frames


# -- bounds and errors ----------------------------------------------------------------------


def test_encode_counts_the_limit_in_bytes_newline_included() -> None:
    overhead = len(encode({"type": "x", "pad": ""}))
    exact = {"type": "x", "pad": "a" * (MAX_FRAME - overhead)}
    assert len(encode(exact)) == MAX_FRAME
    with pytest.raises(ProtocolError) as caught:
        encode({"type": "x", "pad": "a" * (MAX_FRAME - overhead + 1)})
    assert_one_line(caught.value)
    # fewer characters than the limit, more bytes than it
    with pytest.raises(ProtocolError):
        encode({"type": "x", "pad": "é" * (MAX_FRAME // 2)})


def test_the_reader_takes_a_frame_of_exactly_its_limit() -> None:
    data = encode({"type": "text_delta", "text": "ok"})
    reader = FrameReader(limit=len(data))
    assert reader.feed(data) == [{"type": "text_delta", "text": "ok"}]
    reader = FrameReader(limit=len(data))
    got: list[dict[str, Any]] = []
    for i in range(len(data)):
        got += reader.feed(data[i : i + 1])
    assert got == [{"type": "text_delta", "text": "ok"}]


def test_the_reader_refuses_a_frame_over_its_limit_before_its_newline() -> None:
    data = encode({"type": "text_delta", "text": "too long"})
    reader = FrameReader(limit=len(data) - 1)
    # everything but the last two bytes: still a frame that could fit
    assert reader.feed(data[:-2]) == []
    with pytest.raises(ProtocolError) as caught:
        reader.feed(data[-2:-1])  # the buffer alone now reaches the limit, newline or not
    assert_one_line(caught.value)


def test_the_reader_refuses_an_unending_line() -> None:
    reader = FrameReader(limit=64)
    with pytest.raises(ProtocolError):
        reader.feed(b'{"type":"x","pad":"' + b"a" * 100)


def test_the_reader_refuses_a_whole_frame_over_its_limit() -> None:
    data = encode({"type": "text_delta", "text": "too long"})
    with pytest.raises(ProtocolError):
        FrameReader(limit=len(data) - 1).feed(data)


@pytest.mark.parametrize(
    "line",
    [
        b"",
        b"not json",
        b'{"type": "x"',
        b"\xff\xfe{}",
        b"[" * 100_000,  # deeper than the parser goes
        b'["type", "x"]',
        b'"text_delta"',
        b"42",
        b"null",
        b"{}",
        b'{"text": "hi"}',
        b'{"type": 3}',
        b'{"type": null}',
        b'{"type": ["x"]}',
    ],
)
def test_what_is_not_a_frame_is_a_one_line_protocol_error(line: bytes) -> None:
    with pytest.raises(ProtocolError) as caught:
        decode(line)
    assert_one_line(caught.value)
    with pytest.raises(ProtocolError) as caught:
        FrameReader().feed(line + b"\n")
    assert_one_line(caught.value)


def test_an_unknown_event_type_is_one_the_client_skips() -> None:
    with pytest.raises(frames.FrameError) as caught:
        frames.decode_frame(b'{"type": "from_the_future", "text": "hi"}')
    assert caught.value.problem == "unknown_type"


def test_unknown_fields_are_dropped() -> None:
    line = b'{"type": "text_delta", "text": "hi", "colour": "red", "n": [1]}'
    assert frames.decode_frame(line) == events.TextDelta(text="hi")
    assert frames.decode_frame(b'{"type": "quiet", "since": 12.5}') == events.Quiet()


def required_fields(cls: type[Any]) -> list[str]:
    return [field.name for field in msgspec.structs.fields(cls) if field.required]


@pytest.mark.parametrize(
    ("name", "missing"),
    [(name, field) for name, cls in EVENT_NAMES.items() for field in required_fields(cls)],
)
def test_a_known_event_without_a_required_field_is_a_protocol_error(
    name: str, missing: str
) -> None:
    frame = event_frame(SAMPLES[name])
    del frame[missing]
    line = json.dumps(frame).encode()
    with pytest.raises(frames.FrameError) as caught:
        frames.decode_frame(line)
    assert caught.value.problem == "bad_fields"
    assert_one_line(caught.value)
    assert name in str(caught.value)


@pytest.mark.parametrize(
    "thing",
    [
        object(),
        None,
        "text_delta",
        {"type": "text_delta", "text": "hi"},
        events.TextDelta,  # the class, not an event
        base.Usage(),
        wire.ProtocolError("x"),
    ],
)
def test_the_name_of_what_is_not_an_event_is_a_value_error(thing: object) -> None:
    with pytest.raises(ValueError, match="not an event of the protocol"):
        event_name(thing)
    with pytest.raises(ValueError):
        event_frame(thing)


def test_a_frame_is_strict_json_in_utf_8() -> None:
    """A float that is not finite goes as null; a lone surrogate as U+FFFD: any peer parses it."""
    data = encode({"type": "catching_up", "to_go": 3, "eta_seconds": float("inf")})
    assert decode(data[:-1]) == {"type": "catching_up", "to_go": 3, "eta_seconds": None}
    data = encode({"type": "tool_finished", "output": "name\udcff.txt"})
    assert "\ufffd" in decode(data[:-1])["output"]
    data.decode("utf-8")  # valid UTF-8 throughout
