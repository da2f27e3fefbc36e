"""Message and tree records (SPEC §1.2, §2.2)."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from evertalk.store.records import (
    BUILT,
    CUT,
    FREE,
    KINDS,
    MessageRecord,
    NodeRecord,
    decode_message,
    decode_node,
    encode_message,
    encode_node,
)

texts = st.text(st.characters(exclude_categories=("Cs",)), max_size=200)


def test_message_keys_come_in_the_spec_order() -> None:
    line = encode_message(3, "user", "héllo\n", "2026-10-08T14:03:22+02:00", key="k", agent="Bo")
    assert list(json.loads(line)) == ["i", "kind", "text", "size", "date", "key", "agent"]
    assert json.loads(line)["size"] == 7
    assert b"\n" not in line and "é".encode() in line  # UTF-8, not \u escapes


@given(
    i=st.integers(0, 2**40),
    kind=st.sampled_from(sorted(KINDS)),
    text=texts,
    key=st.none() | st.text(max_size=10),
    images=st.none() | st.lists(st.text(max_size=10), max_size=3),
    agent=st.none() | st.text(max_size=10),
)
def test_messages_round_trip(
    i: int, kind: str, text: str, key: str | None, images: list[str] | None, agent: str | None
) -> None:
    date = "2026-10-08T14:03:22+02:00"
    line = encode_message(i, kind, text, date, key, images, agent)
    assert b"\n" not in line
    record = decode_message(json.loads(line))
    expected_images = tuple(images) if images is not None else None
    size = len(text.encode())
    assert record == MessageRecord(i, kind, text, size, date, key, expected_images, agent)


@given(l=st.integers(0, 40), i=st.integers(0, 2**30), text=texts, flag=st.sampled_from([1, 2, 3]))
def test_nodes_round_trip(l: int, i: int, text: str, flag: int) -> None:  # noqa: E741
    line = encode_node(l, i, text, flag)
    obj = json.loads(line)
    assert list(obj)[:4] == ["l", "i", "text", "size"]
    assert obj.get("free", False) is (flag == FREE) and obj.get("cut", False) is (flag == CUT)
    assert decode_node(obj) == NodeRecord(l, i, text, len(text.encode()), flag)


@pytest.mark.parametrize(
    "obj",
    [
        {"i": -1, "kind": "user", "text": "x", "size": 1, "date": ""},
        {"i": True, "kind": "user", "text": "x", "size": 1, "date": ""},
        {"i": 1.0, "kind": "user", "text": "x", "size": 1, "date": ""},
        {"i": 1, "kind": "robot", "text": "x", "size": 1, "date": ""},
        {"i": 1, "kind": "user", "text": 5, "size": 1, "date": ""},
        {"i": 1, "kind": "user", "text": "x", "date": ""},
        {"i": 1, "kind": "user", "text": "x", "size": 1},
        {"i": 1, "kind": ["user"], "text": "x", "size": 1, "date": ""},
        {"kind": "user", "text": "x", "size": 1, "date": ""},
    ],
)
def test_invalid_messages_do_not_decode(obj: dict[str, object]) -> None:
    assert decode_message(obj) is None


def test_a_malformed_optional_key_is_dropped_and_the_size_is_the_texts() -> None:
    obj = {"i": 1, "kind": "note", "text": "ab", "size": 9, "date": "d", "key": 5, "images": [1]}
    assert decode_message(obj) == MessageRecord(1, "note", "ab", 2, "d")


@pytest.mark.parametrize(
    "obj",
    [
        {"l": 0, "i": 0, "text": "x", "size": 1, "free": True, "cut": True},
        {"l": 0, "i": 0, "text": "x", "size": 1, "free": 1},
        {"l": -1, "i": 0, "text": "x", "size": 1},
        {"l": 0, "i": 0, "text": None, "size": 1},
        {"l": 0, "i": 0, "text": "\ud800", "size": 1},
        {"i": 0, "text": "x", "size": 1},
    ],
)
def test_invalid_nodes_do_not_decode(obj: dict[str, object]) -> None:
    assert decode_node(obj) is None


def test_encoders_refuse_what_they_cannot_write() -> None:
    with pytest.raises(ValueError, match="kind"):
        encode_message(0, "robot", "x", "d")
    with pytest.raises(ValueError, match="surrogate"):
        encode_message(0, "user", "\ud800", "d")
    with pytest.raises(ValueError, match="flag"):
        encode_node(0, 0, "x", 0)
    assert decode_node({"l": 0, "i": 0, "text": "x", "size": 1}) == NodeRecord(0, 0, "x", 1, BUILT)
