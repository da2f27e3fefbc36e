"""docs/protocol.md against the frame types (`protocol/frames.py`): every request, event, reply
and unasked frame is documented with the fields its type has, every frame the document shows is
a type, and the error kinds are the document's table."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any, get_args

import msgspec
import pytest

from evertalk.protocol import frames, replies

DOC = (Path(__file__).parents[2] / "docs" / "protocol.md").read_text()
ENVELOPE = {"rid"}  # any request's, copied into its answer


def tag(cls: Any) -> str:
    return str(cls.__struct_config__.tag)


def fields(cls: Any) -> set[str]:
    return set(cls.__struct_fields__) - ENVELOPE


def section(title: str) -> str:
    """The text under a heading, up to the next heading of any level."""
    found = re.search(rf"^#+ {re.escape(title)}\n(.*?)(?=^#+ )", DOC + "\n# end", re.M | re.S)
    assert found is not None, title
    return found.group(1)


def table(text: str) -> list[list[str]]:
    """The rows of the first table in `text`, cells stripped, without header and rule."""
    rows = [line for line in text.splitlines() if line.startswith("|")]
    return [[cell.strip() for cell in row.strip("|").split("|")] for row in rows[2:]]


def names(cell: str) -> set[str]:
    """The backticked names of a cell, leaving out what is in parentheses (values, types)."""
    bare = re.sub(r"\([^)]*\)", "", cell)
    return set(re.findall(r"`(\w+)`", bare))


def examples() -> list[dict[str, Any]]:
    """Every JSON frame the document shows, its placeholders made values."""
    shown = re.findall(r"`(\{\"type\":.*?\})`", DOC.replace("\n", " "))
    for block in re.findall(r"```(?:json)?\n(.*?)```", DOC, re.S):
        text = re.sub(r"^[<>] ", "", block, flags=re.M)
        joined = re.sub(r",\n\s*", ",", text.strip())
        shown += [line for line in joined.splitlines() if line.startswith('{"type":')]
    found = []
    for text in shown:
        text = re.sub(r",\s*…", "", text)
        text = text.replace("[…]", "[]").replace("{…}", "{}")
        text = re.sub(r":([NMK])\b", ":0", text)
        found.append(json.loads(text))
    return found


SERVICE = get_args(frames.ServiceFrame)
CLIENT = get_args(frames.ClientFrame)
REQUESTS = get_args(frames.RequestFrame)
EVENTS = get_args(frames.EventFrame)


def test_the_examples_are_read() -> None:
    shown = {example["type"] for example in examples()}
    assert {"hello", "welcome", "send", "status", "compact", "ask", "quiet"} <= shown


def test_the_requests_table_is_the_requests() -> None:
    rows = table(section("Requests"))
    documented = {row[0].strip("`"): names(row[1]) for row in rows}
    assert set(documented) == {tag(cls) for cls in REQUESTS}
    for cls in REQUESTS:
        assert documented[tag(cls)] == fields(cls), tag(cls)


def test_the_answers_of_the_requests_table_are_replies() -> None:
    by_tag = {tag(cls): cls for cls in SERVICE}
    for row in table(section("Requests")):
        for name, listed in re.findall(r"`(\w+)` `\{([^}]*)\}`", row[2]):
            assert set(re.findall(r"\w+", listed)) <= fields(by_tag[name]), name


def test_the_events_table_is_the_events() -> None:
    rows = table(section("Events"))
    documented = {row[0].strip("`"): names(row[1]) for row in rows}
    assert set(documented) == {tag(cls) for cls in EVENTS}
    for cls in EVENTS:
        assert documented[tag(cls)] == fields(cls), tag(cls)


@pytest.mark.parametrize(
    ("title", "cls"),
    [
        ("status", replies.Status),
        ("compact", replies.Compact),
        ("usage", replies.Usage),
        ("records", replies.RecordItem),
    ],
)
def test_a_field_table_is_its_type(title: str, cls: Any) -> None:
    text = section(title)
    if title == "records":  # the second table: a record's fields
        text = text[text.index("each with:") :]
    documented: set[str] = set()
    for row in table(text):
        documented |= names(row[0])
    assert documented == fields(cls)


def test_the_error_kinds_are_the_table() -> None:
    kinds = {row[0].strip("`") for row in table(section("Errors"))}
    assert kinds == set(get_args(replies.ErrorKind))


def test_every_frame_shown_is_a_type_with_those_fields() -> None:
    by_tag: dict[str, set[str]] = {}
    for cls in (*SERVICE, *CLIENT):
        by_tag.setdefault(tag(cls), set()).update(fields(cls) | ENVELOPE)
    for example in examples():
        assert example["type"] in by_tag, example
        assert set(example) - {"type"} <= by_tag[example["type"]], example


def test_every_frame_type_is_documented_with_all_its_fields() -> None:
    """A frame of neither table shows each of its fields in an example, in the `{…}` of an
    answer, or in a bullet of the section that shows it."""
    tabled = {tag(cls) for cls in (*REQUESTS, *EVENTS)} | {"status", "compact", "usage"}
    shown: dict[str, set[str]] = {}
    for example in examples():
        shown.setdefault(example["type"], set()).update(example)
    bullets = set(re.findall(r"^- `(\w+)`", DOC, re.M))
    for cls in (*SERVICE, *CLIENT):
        name = tag(cls)
        if name in tabled and cls not in (replies.Records,):
            continue
        assert name in shown, f"{name} has no example"
        missing = fields(cls) - shown[name] - bullets
        assert not missing, f"{name}: {sorted(missing)} not documented"


def test_the_examples_decode_as_their_types() -> None:
    """The examples that are whole frames (no placeholder) read as frames of their type."""
    for example in examples():
        line = json.dumps(example).encode()
        if "…".encode() in json.dumps(example, ensure_ascii=False).encode():
            continue  # a placeholder where a value of a set must be
        decoders = (frames.decode_frame, frames.decode_request)
        read = []
        for decode in decoders:
            try:
                read.append(decode(line))
            except frames.FrameError:
                continue
        assert read, example
        assert all(isinstance(frame, msgspec.Struct) for frame in read)
