"""Text made safe for a terminal: every control character shown, none of them sent raw."""

from __future__ import annotations

import subprocess
import sys

import pytest

from evertalk.terminal_text import counted, escape_controls

HOSTILE = "before\x1b[2J\x1b]0;pwned\x07 \x9bafter"


def test_escape_sequences_and_c1_bytes_show_as_escapes() -> None:
    assert escape_controls(HOSTILE) == "before\\x1b[2J\\x1b]0;pwned\\x07 \\x9bafter"


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("\x00", "\\x00"),
        ("\x08", "\\x08"),  # backspace: it would rub out what came before it
        ("\x0b\x0c", "\\x0b\\x0c"),
        ("\x1f", "\\x1f"),
        ("\x7f", "\\x7f"),
        ("\x80\x85\x9f", "\\x80\\x85\\x9f"),
        ("\u202e", "\\u202e"),  # right-to-left override: text that reads other than it is
        ("\u202a\u202b\u202c\u202d", "\\u202a\\u202b\\u202c\\u202d"),
        ("\u2066\u2067\u2068\u2069", "\\u2066\\u2067\\u2068\\u2069"),
    ],
)
def test_each_control_shows_as_its_code(raw: str, shown: str) -> None:
    assert escape_controls(f"a{raw}b") == f"a{shown}b"


def test_a_lone_carriage_return_shows_but_a_line_end_stays() -> None:
    # a lone CR would move the cursor back and let the rest of the line hide what came first
    assert escape_controls("safe\rrm -rf ~") == "safe\\x0drm -rf ~"
    assert escape_controls("one\r\ntwo\r") == "one\r\ntwo\\x0d"
    assert escape_controls("a\r\r\nb") == "a\\x0d\r\nb"


def test_ordinary_text_is_untouched() -> None:
    text = (
        "lines\nand\ttabs, C:\\path\\x1b as typed, é, 日本語, 👨\u200d👩\u200d👧, "
        "\u200f\u05e9\u05dc\u05d5\u05dd\u200e, \u00a0\u00ad\u2028"
    )
    assert escape_controls(text) == text
    assert escape_controls("") == ""


def test_importing_it_loads_nothing_heavy() -> None:
    code = (
        "import sys, evertalk.terminal_text; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in "
        "('rich', 'textual', 'anyio', 'anthropic', 'openai', 'httpx')))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.stdout.strip() == "[]", result.stderr


def test_a_count_and_its_noun_agree() -> None:
    assert counted(1, "message") == "1 message"
    assert counted(0, "message") == "0 messages"
    assert counted(1_200, "row") == "1,200 rows"
    assert counted(2, "summary", "summaries") == "2 summaries"
    assert counted(1, "summary", "summaries") == "1 summary"
