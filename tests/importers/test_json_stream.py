"""`list_items`: a JSON list read item by item gives what parsing it whole gives, and says where
a damaged one stops."""

from __future__ import annotations

import io
import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from evertalk.importers.json_stream import Damaged, NotAList, list_items

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
