"""`list_items`: a JSON list read item by item gives what parsing it whole gives, and says where
a damaged one stops."""

from __future__ import annotations

import io
import json
import tracemalloc
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from evertalk.importers.json_stream import Damaged, NotAList, cut_chars, cut_mark, list_items

VALUES: st.SearchStrategy[Any] = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(), inner, max_size=3),
    max_leaves=10,
)


@given(
    items=st.lists(VALUES, max_size=6), indent=st.sampled_from([None, 1]), chunk=st.integers(1, 9)
)
def test_items_read_a_few_bytes_at_a_time_are_the_lists(
    items: list[Any], indent: int | None, chunk: int
) -> None:
    data = json.dumps(items, indent=indent, ensure_ascii=False).encode()
    assert list(list_items(io.BytesIO(b"\xef\xbb\xbf " + data + b"\n"), chunk)) == items


def test_a_damaged_list_gives_the_items_before_and_names_the_line() -> None:
    data = b'[{"a": 1},\n{"b": 2},\n{"c": ]'
    found: list[Any] = []
    with pytest.raises(Damaged) as raised:
        found.extend(list_items(io.BytesIO(data), 4))
    assert found == [{"a": 1}, {"b": 2}]
    assert raised.value.line == 3


@pytest.mark.parametrize("data", [b'{"a": [1]}', b'"text"', b""])
def test_a_document_that_is_not_a_list_says_so(data: bytes) -> None:
    with pytest.raises(NotAList):
        list(list_items(io.BytesIO(data)))


def test_data_after_the_list_is_damage() -> None:
    with pytest.raises(Damaged, match="extra data"):
        list(list_items(io.BytesIO(b"[1, 2] [3]")))


def cut(value: Any, longest: int) -> Any:
    """`value` with each string longer than `longest` as its mark, as `list_items` gives it."""
    if isinstance(value, str):
        return cut_mark(len(value)) if len(value) > longest else value
    if isinstance(value, list):
        return [cut(item, longest) for item in value]
    if isinstance(value, dict):
        return {key: cut(item, longest) for key, item in value.items()}
    return value


SHORT_KEYS: st.SearchStrategy[Any] = st.recursive(
    st.none() | st.integers() | st.text(alphabet=st.characters(codec="utf-8")),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=2), inner),
    max_leaves=8,
)


@given(
    items=st.lists(SHORT_KEYS, max_size=4),
    ascii_only=st.booleans(),
    chunk=st.integers(1, 9),
    longest=st.integers(2, 12),
)
def test_strings_over_the_longest_are_given_as_their_length(
    items: list[Any], ascii_only: bool, chunk: int, longest: int
) -> None:
    # escapes (\\n, \\u00e9, surrogate pairs) count as the one character each decodes to
    data = json.dumps(items, ensure_ascii=ascii_only).encode()
    found = list(list_items(io.BytesIO(data), chunk, longest=longest))
    assert found == [cut(item, longest) for item in items]


class Endless(io.RawIOBase):
    """`[{"text": "x\\nx\\n…"}, "after"]`, its text `chars` characters long (a multiple of
    65,536), made as it is read: never held whole. An escape every other character is the
    slowest text to count."""

    def __init__(self, chars: int) -> None:
        part = b"x\\n" * 32768
        self.parts = iter([b'[{"text": "', *[part] * (chars // 65536), b'"}, "after"]'])
        self.rest = b""

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not self.rest:
            self.rest = next(self.parts, b"")
            if not self.rest:
                return 0
        size = min(len(buffer), len(self.rest))
        buffer[:size] = self.rest[:size]
        self.rest = self.rest[size:]
        return size


def test_a_string_over_the_longest_is_read_through_without_being_held() -> None:
    chars = 64 * 1024 * 1024
    tracemalloc.start()
    try:
        found = list(list_items(io.BufferedReader(Endless(chars)), longest=1000))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert found == [{"text": cut_mark(chars)}, "after"]
    assert cut_chars(found[0]["text"]) == chars
    assert peak < 4 * 1024 * 1024, peak  # a few chunks, not the 64 MiB


def test_a_cut_string_that_never_ends_is_damage() -> None:
    with pytest.raises(Damaged, match="unterminated string"):
        list(list_items(io.BytesIO(b'[1,\n"' + b"x" * 5000), 64, longest=100))
