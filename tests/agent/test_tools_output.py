"""Streaming clipping: a ClipBuffer fed in any pieces gives exactly `clip_output` (SPEC §1.5)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from budget import examples
from evertalk.agent.tools.output import ClipBuffer, clip_shape
from evertalk.memory.text import MESSAGE_LIMIT, clip_note, clip_output


@settings(max_examples=examples(300), deadline=None)
@given(
    st.text(alphabet="ab\n\u00e9\U0001f600", max_size=2_000),
    st.integers(60, 400),
    st.lists(st.integers(0, 300), max_size=40),
)
def test_buffer_equals_clip_output(text: str, limit: int, cuts: list[int]) -> None:
    buffer = ClipBuffer(limit)
    rest = text
    for size in cuts:
        buffer.feed(rest[:size])
        rest = rest[size:]
    buffer.feed(rest)
    assert buffer.total == len(text)
    assert buffer.text() == clip_output(text, limit)
    assert buffer.ends_with_newline() == text.endswith("\n")


@given(st.integers(MESSAGE_LIMIT + 1, 10**12))
def test_shape_at_the_real_limit(total: int) -> None:
    head, tail, cut = clip_shape(total)
    assert head + tail + cut == total
    assert head + tail + 2 + len(clip_note(cut)) <= MESSAGE_LIMIT
    assert head - tail in (0, 1)
