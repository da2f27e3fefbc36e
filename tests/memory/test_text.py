"""Text rules (SPEC §1.5, §1.6, §2.5, §3.1, §3.2): cutting, flattening, clipping, splitting."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from budget import examples
from evertalk.memory.text import (
    PLACEHOLDER,
    clip_output,
    cut_utf8,
    flatten,
    split_text,
    utf8_len,
)

LIMIT = 30_000
MULTIBYTE = ["é", "€", "😀"]  # 2, 3 and 4 bytes


def nbytes(text: str) -> int:
    return len(text.encode("utf-8"))


# -- sizes --------------------------------------------------------------------------------


def test_placeholder_is_29_bytes() -> None:
    assert PLACEHOLDER == "(not summarized yet: zoom it)"
    assert utf8_len(PLACEHOLDER) == 29


@given(st.text())
def test_utf8_len(text: str) -> None:
    assert utf8_len(text) == len(text.encode("utf-8", "surrogatepass"))


# -- cut_utf8 -----------------------------------------------------------------------------


def assert_longest_prefix(text: str, cut: str, limit: int) -> None:
    assert text.startswith(cut)
    assert nbytes(cut) <= limit
    if cut != text:
        # one more whole character would not fit
        assert nbytes(text[: len(cut) + 1]) > limit


@pytest.mark.parametrize("char", MULTIBYTE)
def test_cut_never_ends_inside_a_character(char: str) -> None:
    width = nbytes(char)
    assert width in (2, 3, 4)
    # every placement of the character that straddles byte 512, and the ones that just fit
    for before in range(512 - width - 1, 513):
        text = "a" * before + char + "b" * 20
        cut = cut_utf8(text)
        assert_longest_prefix(text, cut, 512)
        if before + width <= 512:
            assert cut == "a" * before + char + "b" * (512 - before - width)
            assert nbytes(cut) == 512
        else:
            assert cut == "a" * before
        # decoding the cut strictly proves it ends on a character boundary
        assert cut.encode("utf-8").decode("utf-8") == cut


@pytest.mark.parametrize("char", MULTIBYTE)
def test_cut_of_only_multibyte_characters(char: str) -> None:
    text = char * 400
    cut = cut_utf8(text)
    assert cut == char * (512 // nbytes(char))


def test_cut_keeps_short_texts() -> None:
    assert cut_utf8("") == ""
    assert cut_utf8("x" * 512) == "x" * 512
    assert cut_utf8("x" * 513) == "x" * 512
    assert cut_utf8("é" * 256) == "é" * 256


@given(st.text(alphabet=st.characters(exclude_categories=["Cs"]), max_size=700))
def test_cut_is_the_longest_fitting_prefix(text: str) -> None:
    assert_longest_prefix(text, cut_utf8(text), 512)


@given(
    st.text(alphabet=st.sampled_from(["a", "\n", *MULTIBYTE]), min_size=0, max_size=300),
    st.integers(0, 600),
)
def test_cut_with_any_limit(text: str, limit: int) -> None:
    assert_longest_prefix(text, cut_utf8(text, limit), limit)


# -- flatten ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "flat"),
    [
        ("a\r\nb", "a b"),
        ("a\rb", "a b"),
        ("a\nb", "a b"),
        ("a\n\rb", "a  b"),
        ("a\r\r\nb", "a  b"),
        ("a\r\n\nb", "a  b"),
        ("\r\n\r\n", "  "),
        ("no newline", "no newline"),
        ("", ""),
    ],
)
def test_flatten_examples(text: str, flat: str) -> None:
    assert flatten(text) == flat


@given(st.text(alphabet=st.sampled_from(["a", " ", "\r", "\n", "é"])))
def test_flatten_matches_rule(text: str) -> None:
    flat = flatten(text)
    assert flat == re.sub(r"\r\n|\r|\n", " ", text)
    assert "\n" not in flat and "\r" not in flat
    assert len(flat) == len(text) - text.count("\r\n")


# -- clip_output --------------------------------------------------------------------------


def parse_clip(clipped: str) -> tuple[str, str, int]:
    """Split a clipped text whose input has no digits: the note is the one line with digits."""
    digits = [m.start() for m in re.finditer(r"\d", clipped)]
    assert digits, "a note with the count"
    start = clipped.rindex("\n", 0, digits[0]) + 1
    end = clipped.index("\n", digits[-1])
    note = clipped[start:end]
    assert "\n" not in note, "the count is on one line"
    head, tail = clipped[: start - 1], clipped[end + 1 :]
    numbers = re.findall(r"\d[\d,]*", note)
    assert len(numbers) == 1, note
    return head, tail, int(numbers[0].replace(",", ""))


def check_clip(text: str) -> None:
    clipped = clip_output(text)
    if len(text) <= LIMIT:
        assert clipped == text
        return
    assert len(clipped) <= LIMIT
    head, tail, count = parse_clip(clipped)
    assert text.startswith(head)
    assert text.endswith(tail)
    assert abs(len(head) - len(tail)) <= 1
    assert count == len(text) - len(head) - len(tail)  # the note's count is exact
    assert count > 0


def test_clip_keeps_30000() -> None:
    assert clip_output("x" * LIMIT) == "x" * LIMIT


# lengths around 30,001 and where the cut count gains a digit (…9 → …10, …99 → …100)
_LENGTHS = sorted(
    {LIMIT + 1, LIMIT + 2, LIMIT + 3, 2 * LIMIT, 10**6}
    | {LIMIT + d for d in range(30, 130)}
    | {LIMIT + d for d in range(960, 1100)}
    | {LIMIT + d for d in range(9960, 10_100)}
)


@pytest.mark.parametrize("length", _LENGTHS)
def test_clip_lengths(length: int) -> None:
    text = ("abc def\n" * (length // 8 + 1))[:length]
    check_clip(text)


@settings(max_examples=examples(60), deadline=None)
@given(
    st.text(alphabet=st.sampled_from(["a", "b", " ", "\n", "é", "😀"]), min_size=1, max_size=50),
    st.integers(LIMIT - 5, 3 * LIMIT),
)
def test_clip_hypothesis(pattern: str, length: int) -> None:
    text = (pattern * (length // len(pattern) + 1))[:length]
    check_clip(text)


# -- split_text ---------------------------------------------------------------------------


def expected_pieces(text: str) -> list[int]:
    """Piece lengths by SPEC §1.6, written from the rule."""
    lengths = []
    rest = text
    while len(rest) > LIMIT:
        window = rest[24_000:LIMIT]  # the piece's characters 24,001 … 30,000
        if "\n" in window:
            end = 24_000 + window.rindex("\n") + 1
        elif " " in window:
            end = 24_000 + window.rindex(" ") + 1
        else:
            end = LIMIT
        lengths.append(end)
        rest = rest[end:]
    lengths.append(len(rest))
    return lengths


def check_split(text: str) -> None:
    pieces = split_text(text)
    assert "".join(pieces) == text
    assert all(len(piece) <= LIMIT for piece in pieces)
    assert [len(piece) for piece in pieces] == expected_pieces(text)
    if len(text) <= LIMIT:
        assert pieces == [text]
    for piece in pieces[:-1]:
        assert piece  # no empty page in the middle
        window = piece[24_000:]
        if piece.endswith("\n"):
            assert len(piece) > 24_000
        elif piece.endswith(" ") and len(piece) > 24_000:
            assert "\n" not in window  # a space only when no newline was there
        else:
            assert len(piece) == LIMIT
            assert "\n" not in window and " " not in window


def test_split_boundaries() -> None:
    assert split_text("") == [""]
    assert split_text("x" * LIMIT) == ["x" * LIMIT]
    assert split_text("x" * (LIMIT + 1)) == ["x" * LIMIT, "x"]
    # a newline at character 24,000 is outside the window; at 24,001 it is inside
    text = "x" * 23_999 + "\n" + "x" * 10_000
    assert [len(p) for p in split_text(text)] == [LIMIT, len(text) - LIMIT]
    text = "x" * 24_000 + "\n" + "x" * 10_000
    assert [len(p) for p in split_text(text)] == [24_001, len(text) - 24_001]
    # the last newline wins over a later space
    text = "x" * 25_000 + "\n" + "x" * 1_000 + " " + "x" * 10_000
    assert len(split_text(text)[0]) == 25_001
    # a space when there is no newline; the last space
    text = "x" * 25_000 + " " + "x" * 1_000 + " " + "x" * 10_000
    assert len(split_text(text)[0]) == 26_002
    # a newline exactly at character 30,000 ends the piece there
    text = "x" * 29_999 + "\n" + "x" * 5
    assert [len(p) for p in split_text(text)] == [LIMIT, 5]
    # a newline at character 30,001 is not in the piece
    text = "x" * LIMIT + "\n" + "x" * 5
    assert [len(p) for p in split_text(text)] == [LIMIT, 6]
    for case in ["é" * 70_000, "😀" * 61_000, ("a b\n" * 20_000)]:
        check_split(case)


@st.composite
def long_texts(draw: st.DrawFn) -> str:
    runs = draw(
        st.lists(
            st.tuples(
                st.sampled_from(["a", "b", " ", "\n", "é", "😀", "ab", "a b", "x\n"]),
                st.integers(1, 20_000),
            ),
            min_size=1,
            max_size=12,
        )
    )
    return "".join(unit * count for unit, count in runs)


@settings(max_examples=examples(80), deadline=None)
@given(long_texts())
def test_split_hypothesis(text: str) -> None:
    check_split(text)
