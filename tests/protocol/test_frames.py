"""The frame types (`protocol/frames.py`): every frame goes out as the bytes the wire has always
carried and reads back as itself, and a line that is not a frame of the protocol is one
FrameError that says how, in one line."""

from __future__ import annotations

import inspect
import json
from types import ModuleType
from typing import Any, get_args

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from budget import examples
from evertalk.protocol import events, frames, replies, requests, wire

AGENT = {
    "model": "m",
    "view_bytes": 84210,
    "view_ceiling": 128000,
    "view_floor": 64000,
    "merging": False,
    "view_merges": 911,
    "compactor_running": 2,
    "compactor_queued": 5,
    "cost": 0.4127,
    "turn_cost": 0.3318,
    "busy": True,
    "subagents": 0,
}

RECORD = replies.RecordItem(id=1, kind="user", text="hi", key=None, date="d", images=[])
RECORD_WIRE = {"id": 1, "kind": "user", "text": "hi", "key": None, "date": "d", "images": []}

# One instance of every frame the service sends, and the object the wire has for it.
SERVICE: list[tuple[msgspec.Struct, dict[str, Any]]] = [
    (
        replies.Welcome(protocol=2, version="0.1.0", pid=4100, home="/h", name="t 1"),
        {
            "type": "welcome",
            "protocol": 2,
            "version": "0.1.0",
            "pid": 4100,
            "home": "/h",
            "name": "t 1",
        },
    ),
    (
        replies.Error(kind="busy", message="a turn is working: try again", rid=7),
        {"type": "error", "kind": "busy", "message": "a turn is working: try again", "rid": 7},
    ),
    (
        replies.Accepted(key="k", duplicate=False, held=True, rid=1),
        {"type": "accepted", "key": "k", "duplicate": False, "held": True, "rid": 1},
    ),
    (
        replies.Accepted(key=None, duplicate=True),
        {"type": "accepted", "key": None, "duplicate": True},
    ),
    (
        replies.Accepted(ids=[4, 5], duplicate=False, rid="x"),
        {"type": "accepted", "ids": [4, 5], "duplicate": False, "rid": "x"},
    ),
    (replies.Ok(), {"type": "ok"}),
    (
        replies.Status(
            pid=1,
            version="v",
            clients=2,
            messages=3,
            catching_up=events.Behind(4, None),
            mcp_problems=("a: stopped",),
            rid=[1],
            **AGENT,
        ),
        {
            "type": "status",
            "pid": 1,
            "version": "v",
            "clients": 2,
            "messages": 3,
            **AGENT,
            "compactor_failed": 0,
            "compactor_error": None,
            "compactor_paused": False,
            "catching_up": {"to_go": 4, "eta_seconds": None, "view_tokens": None},
            "tools_unused": False,
            "chat_error": None,
            "mcp_problems": ["a: stopped"],
            "budget": None,
            "rid": [1],
        },
    ),
    (replies.Output(texts=["a", "b"]), {"type": "output", "texts": ["a", "b"]}),
    (
        replies.Records(
            t=9,
            records=[
                replies.RecordItem(id=1, kind="user", text="hé", key=None, date="d", images=[]),
                replies.RecordItem(
                    id=2, kind="echo", text="x", key="k", date="d", images=["a.png"], failed=True
                ),
            ],
        ),
        {
            "type": "records",
            "t": 9,
            "records": [
                {"id": 1, "kind": "user", "text": "hé", "key": None, "date": "d", "images": []},
                {
                    "id": 2,
                    "kind": "echo",
                    "text": "x",
                    "key": "k",
                    "date": "d",
                    "images": ["a.png"],
                    "failed": True,
                },
            ],
        },
    ),
    (replies.View(text="<chat>"), {"type": "view", "text": "<chat>"}),
    (replies.Zoom(text="0+1|user: hi"), {"type": "zoom", "text": "0+1|user: hi"}),
    (replies.Date(text="2026"), {"type": "date", "text": "2026"}),
    (replies.Appended(ids=[3], skipped=1), {"type": "appended", "ids": [3], "skipped": 1}),
    (
        replies.Compact(
            left=2,
            built=1,
            calls=1,
            cost=0.5,
            rate=None,
            error=None,
            setup_error=None,
            broken=None,
            view_bytes=10,
            merged_from=None,
            catching_up=None,
        ),
        {
            "type": "compact",
            "left": 2,
            "built": 1,
            "calls": 1,
            "cost": 0.5,
            "rate": None,
            "error": None,
            "setup_error": None,
            "broken": None,
            "view_bytes": 10,
            "merged_from": None,
            "catching_up": None,
        },
    ),
    (
        replies.Usage(
            ledger="/l", summary={"total": {"calls": 4}}, table=None, skipped=0, error=None
        ),
        {
            "type": "usage",
            "ledger": "/l",
            "summary": {"total": {"calls": 4}},
            "table": None,
            "skipped": 0,
            "error": None,
        },
    ),
    (
        replies.ForgetPreview(lines=["a"], changes=2),
        {"type": "forget_preview", "lines": ["a"], "changes": 2},
    ),
    (
        replies.Forgotten(messages=1, summaries=2),
        {"type": "forgotten", "messages": 1, "summaries": 2},
    ),
    (
        replies.UndoPreview(turn=4, lines=["l"], changes=1, refused=[]),
        {"type": "undo_preview", "turn": 4, "lines": ["l"], "changes": 1, "refused": []},
    ),
    (
        replies.Undone(turn=4, restored=["a"], removed=[], refused=["b"], lines=["l"]),
        {
            "type": "undone",
            "turn": 4,
            "restored": ["a"],
            "removed": [],
            "refused": ["b"],
            "lines": ["l"],
        },
    ),
    (
        replies.Ask(id="q", tool="shell", input={"command": "ls"}, agent=None, outside=False),
        {
            "type": "ask",
            "id": "q",
            "tool": "shell",
            "input": {"command": "ls"},
            "agent": None,
            "outside": False,
        },
    ),
    (
        replies.Ask(
            id="q", tool="write", input={}, agent="a", outside=True, exists=True, diff="--- x"
        ),
        {
            "type": "ask",
            "id": "q",
            "tool": "write",
            "input": {},
            "agent": "a",
            "outside": True,
            "exists": True,
            "diff": "--- x",
        },
    ),
    (replies.AskClosed(id="q"), {"type": "ask_closed", "id": "q"}),
    (
        replies.AskedElsewhere(id="q", tool="shell", client="app 1"),
        {"type": "asked_elsewhere", "id": "q", "tool": "shell", "client": "app 1"},
    ),
    (
        replies.Reopened(provider="anthropic", model="m", base_url=None),
        {"type": "reopened", "provider": "anthropic", "model": "m", "base_url": None},
    ),
    (
        replies.Stopping(pid=3, reason="signal SIGTERM", on_purpose=True),
        {"type": "stopping", "pid": 3, "reason": "signal SIGTERM", "on_purpose": True},
    ),
    (
        replies.Missed(t=2, first=1, records=[RECORD], unanswered=True, turning=False, edits=3),
        {
            "type": "missed",
            "t": 2,
            "first": 1,
            "records": [RECORD_WIRE],
            "unanswered": True,
            "turning": False,
            "edits": 3,
        },
    ),
    (
        replies.Logged(t=2, first=1, records=[RECORD]),
        {"type": "logged", "t": 2, "first": 1, "records": [RECORD_WIRE]},
    ),
    (
        replies.Changed(records=[RECORD], edits=4),
        {"type": "changed", "records": [RECORD_WIRE], "edits": 4},
    ),
    (events.Quiet(), {"type": "quiet"}),
    (
        events.CatchingUp(5, 2.5),
        {"type": "catching_up", "to_go": 5, "eta_seconds": 2.5, "view_tokens": None},
    ),
]

CLIENT: list[msgspec.Struct] = [
    requests.Hello(
        protocol=2,
        version="0.1.0",
        client="-p",
        pid=4,
        env={"salt": "s", "hashes": {"OPENAI_API_KEY": None}},
        since=12,
    ),
    requests.Send(
        text="hi", key="k", cwd="/c", images=[requests.Image("image/png", "iVBO")], model="m", rid=1
    ),
    requests.Retry(rid=2),
    requests.Cancel(),
    requests.StartNow(),
    requests.GetStatus(rid=3),
    requests.Answer(id="q", decision="once"),
    requests.Stop(),
    requests.Reopen(),
    requests.Command(name="/memory zoom", args=["0", "8"]),
    requests.GetRecords(start=3, end=9),
    requests.GetRecords(last=50, kind="user", scan=2000),
    requests.GetView(),
    requests.GetZoom(id=0, n=8),
    requests.GetDate(id=1),
    requests.Append(
        messages=[
            requests.OutsideMessage(
                kind="note", text="n", key="k", date="2026-10-08T14:03:22+02:00"
            )
        ]
    ),
    requests.GetCompact(),
    requests.GetUsage(),
    requests.Forget(range="3-4", reason="why", preview=True),
    requests.Undo(turn=None, preview=True),
]


def to_old_bytes(frame: dict[str, Any]) -> bytes:
    return wire.encode(frame)


@pytest.mark.parametrize(("frame", "expected"), SERVICE, ids=lambda v: type(v).__name__)
def test_a_service_frame_goes_out_as_the_wire_has_it_and_reads_back(
    frame: msgspec.Struct, expected: dict[str, Any]
) -> None:
    data = frames.encode_frame(frame)
    assert data == to_old_bytes(expected)  # the same bytes, key order included
    assert frames.decode_frame(data[:-1]) == frame


def test_the_samples_cover_every_frame_type() -> None:
    service = {type(frame) for frame, _ in SERVICE}
    assert set(get_args(frames.ServiceFrame)) - set(get_args(frames.EventFrame)) <= service
    assert set(get_args(frames.ClientFrame)) == {type(frame) for frame in CLIENT}


@pytest.mark.parametrize("frame", CLIENT, ids=lambda v: type(v).__name__)
def test_a_request_reads_back_as_itself(frame: msgspec.Struct) -> None:
    data = frames.encode_frame(frame)
    assert data.endswith(b"\n") and data.count(b"\n") == 1
    assert frames.decode_request(data[:-1]) == frame


BASES = {events.Event, replies.Reply, replies.Response, requests.Request}
"""The classes frames derive from: frames of no type themselves."""


def declared(module: ModuleType) -> set[type[Any]]:
    """The frame classes a module of the protocol defines: its Structs tagged in `type`."""
    return {
        cls
        for _, cls in inspect.getmembers(module, inspect.isclass)
        if cls.__module__ == module.__name__
        and issubclass(cls, msgspec.Struct)
        and cls.__struct_config__.tag_field == "type"
        and cls not in BASES
    }


def test_a_frame_declared_once_is_known_everywhere() -> None:
    """A frame class is all there is to declare: the unions read it, the table of events
    names it by its tag, and that tag is its own (snake case, not the class's name)."""
    service, client = declared(events) | declared(replies), declared(requests)
    assert service == set(get_args(frames.ServiceFrame))
    assert client == set(get_args(frames.ClientFrame))
    assert declared(events) == set(wire.EVENT_NAMES.values())
    for cls in service | client:
        name = wire.frame_tag(cls)
        assert name.islower() and name.replace("_", "").isalpha(), cls
    assert len({wire.frame_tag(cls) for cls in service}) == len(service)
    assert len({wire.frame_tag(cls) for cls in client}) == len(client)
    unasked = set(get_args(frames.NoticeFrame)) | set(get_args(frames.FollowerFrame))
    assert unasked | {replies.Welcome} == set(get_args(frames.UnaskedFrame))


def test_every_event_reads_as_a_frame() -> None:
    for cls in get_args(frames.EventFrame):
        assert issubclass(cls, events.Event)
    line = frames.encode_frame(events.TurnEnded("error", "boom", "auth", True))
    assert frames.decode_frame(line[:-1]) == events.TurnEnded("error", "boom", "auth", True)


def test_an_absent_rid_stays_absent_and_any_rid_comes_back_as_it_came() -> None:
    assert b"rid" not in frames.encode_frame(replies.Ok())
    for rid in (0, "a", None, [1, {"b": 2}]):
        line = json.dumps({"type": "status", "rid": rid}).encode()
        request = frames.decode_request(line)
        assert isinstance(request, requests.GetStatus) and request.rid == rid


@pytest.mark.parametrize(
    ("line", "problem", "said"),
    [
        (b"not json", "not_a_frame", "a frame that is not JSON"),
        (b'{"text": "hi"}', "not_a_frame", "a frame that is not an object with a type"),
        (b'{"type": "frob", "rid": 4}', "unknown_type", "unknown request 'frob'"),
        (b'{"type": "send", "rid": 4}', "bad_fields", "send: 'text'"),
        (
            b'{"type": "zoom", "id": "8", "n": 1}',
            "bad_fields",
            "zoom: id is a whole number, not '8'",
        ),
        (b'{"type": "date", "id": true}', "bad_fields", "date: id is a whole number, not True"),
        (b'{"type": "records", "start": -1}', "bad_fields", "records: start is a count, not -1"),
        (b'{"type": "records", "end": null}', "bad_fields", "records: end is a count, not None"),
        (
            b'{"type": "append", "messages": [{"kind": "bogus", "text": "x"}]}',
            "bad_fields",
            "append: kind is one of user, ever, tool, echo, note, not 'bogus'",
        ),
        (
            b'{"type": "send", "text": "x", "images": [{"media_type": "image/png"}]}',
            "bad_fields",
            "send: 'data'",
        ),
        (b'{"type": "send", "text": 5}', "bad_fields", "send: text: Expected `str`, got `int`"),
        (
            b'{"type": "send", "text": "x", "images": [{"media_type": 1, "data": "d"}]}',
            "bad_fields",
            "send: media_type: Expected `str`, got `int`",
        ),
        (
            b'{"type": "command", "name": "x", "args": 3}',
            "bad_fields",
            "command: args: Expected `array`, got `int`",
        ),
        (b'{"type": "hello", "edits": -2}', "bad_fields", "hello: edits is a count, not -2"),
    ],
)
def test_what_is_not_a_request_is_one_frame_error(line: bytes, problem: str, said: str) -> None:
    with pytest.raises(frames.FrameError) as caught:
        frames.decode_request(line)
    assert caught.value.problem == problem
    assert str(caught.value) == said
    assert isinstance(caught.value, wire.ProtocolError)
    if problem != "not_a_frame":
        assert caught.value.rid == json.loads(line).get("rid", msgspec.UNSET)


def test_a_client_tells_a_newer_services_frame_from_a_broken_one() -> None:
    with pytest.raises(frames.FrameError) as caught:
        frames.decode_frame(b'{"type": "from_the_future", "x": 1}')
    assert caught.value.problem == "unknown_type"
    with pytest.raises(frames.FrameError) as caught:
        frames.decode_frame(b'{"type": "accepted", "duplicate": "yes"}')
    assert caught.value.problem == "bad_fields"
    assert "\n" not in str(caught.value)
    with pytest.raises(frames.FrameError) as caught:
        frames.decode_frame(b'{"type": "error", "kind": "frob", "message": "m"}')
    assert caught.value.problem == "bad_fields"


@pytest.mark.parametrize(
    ("line", "said"),
    [
        (
            b'{"type": "accepted", "duplicate": "yes"}',
            "accepted: duplicate: Expected `bool`, got `str`",
        ),
        (
            b'{"type": "error", "kind": "frob", "message": "m"}',
            "error: kind is one of peer, version, restart, protocol, bad_request, not_ready, "
            "nothing_to_retry, nothing_to_undo, over_budget, busy, command, store, too_large, "
            "not 'frob'",
        ),
        (
            b'{"type": "turn_started", "message_ids": [1, "2"]}',
            "turn_started: message_ids: Expected `int`, got `str` - at `$[1]`",
        ),
        (
            b'{"type": "logged", "t": 1, "first": 1, "records": [{"id": "1"}]}',
            "logged: id is a whole number, not '1'",
        ),
        (b'{"type": "missed", "t": 1, "first": 1, "records": []}', "missed: 'unanswered'"),
    ],
)
def test_a_broken_frame_names_its_field(line: bytes, said: str) -> None:
    with pytest.raises(frames.FrameError) as caught:
        frames.decode_frame(line)
    assert caught.value.problem == "bad_fields"
    assert str(caught.value) == said


def test_fields_a_client_does_not_know_are_left_out() -> None:
    frame = frames.decode_frame(b'{"type": "ok", "rid": 1, "colour": "red"}')
    assert frame == replies.Ok(rid=1)


def test_a_frame_is_strict_json_as_before() -> None:
    """A float that is not finite goes as null; a lone surrogate as U+FFFD."""
    data = frames.encode_frame(events.CatchingUp(3, float("inf")))
    assert b'"eta_seconds":null' in data
    data = frames.encode_frame(replies.View(text="name\udcff.txt"))
    assert "\ufffd" in data.decode("utf-8")


def test_the_providers_retrying_goes_without_its_usage() -> None:
    from evertalk.providers import base

    event = base.Retrying(attempt=1, of=3, delay=0.5, why="x", usage=base.Usage(input=3))
    assert frames.encode_frame(event) == to_old_bytes(
        {"type": "retrying", "attempt": 1, "of": 3, "delay": 0.5, "why": "x", "replaces": False}
    )


@settings(max_examples=examples(200), deadline=None)
@given(text=st.text())
def test_any_text_goes_out_as_the_same_bytes(text: str) -> None:
    """Written by msgspec from the Struct, as `wire.encode` writes its dict: escapes, UTF-8,
    U+FFFD for a lone surrogate."""
    event = events.ToolFinished(call_id=text, name="x", output=text, is_error=False)
    assert frames.encode_frame(event) == to_old_bytes(frames.to_dict(event))
    reply = replies.Ask(id="q", tool="t", input={text: [text, 1.5, None]}, agent=None, outside=True)
    assert frames.encode_frame(reply) == to_old_bytes(frames.to_dict(reply))


def test_a_float_msgspec_spells_otherwise_is_the_same_number() -> None:
    event = events.CallUsage(input=1, output=1, cache_read=0, cache_write=0, cost=3e-05)
    data = frames.encode_frame(event)
    assert json.loads(data) == json.loads(to_old_bytes(frames.to_dict(event)))
    assert frames.decode_frame(data[:-1]) == event
