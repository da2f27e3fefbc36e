"""Text on its way to a terminal, with every control character shown rather than obeyed.

A message or a tool's output may hold escape sequences (to clear the screen, set the window's
title, or rewrite what the user reads) and bidirectional overrides (to make a line read other
than it is). Wherever evertalk writes such text to a terminal, it goes through `escape_controls`
first; the log, and what the model is sent, keep the text as it was.

This module imports nothing but `re` and `sys`: `evertalk memory status` must start fast.
"""

from __future__ import annotations

import re
import sys
from typing import Final

# C0 but the line feed and the tab; DEL; C1 (U+0080-U+009F, which a terminal may read as ESC [
# and the like); the explicit bidirectional embeddings, overrides and isolates (U+202A-U+202E,
# U+2066-U+2069: "Trojan Source"). The marks U+200E, U+200F and U+061C stay: right-to-left text
# uses them, and they reorder no run of text. One character class, so that a text with none of
# them is scanned fast (a reply is escaped again at each redraw while it streams).
_CONTROLS: Final = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def escape_controls(text: str) -> str:
    """`text` with each control character written as its code: ESC as `\\x1b`, U+202E as
    `\\u202e`. A backslash is left as it is, so a path or a regex reads as typed (a literal
    `\\x1b` looks the same as an escaped ESC: the log tells them apart)."""
    return _CONTROLS.sub(_code, text)


def _code(found: re.Match[str]) -> str:
    char = found.group()
    if char == "\r" and found.string.startswith("\n", found.end()):
        return char  # a line end (CR LF) is harmless; a lone CR lets a line hide its start
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def one_line(text: str) -> str:
    """`text` with its runs of whitespace, line ends included, made one space."""
    return " ".join(text.split())


def fail(message: str, status: int = 1) -> int:
    """`evertalk: MESSAGE` as one line of standard error, controls shown; the exit status."""
    print(escape_controls(f"evertalk: {one_line(message)}"), file=sys.stderr)
    return status


def confirmed(question: str) -> bool:
    """Whether the user answers yes to `question`, asked with `[y/N]` on standard input; the
    end of the input is a no."""
    try:
        answer = input(f"{question} [y/N] ")
    except EOFError:
        return False
    return answer.strip().lower() in ("y", "yes")


def counted(count: int, noun: str, many: str | None = None) -> str:
    """`1 message`, `2 messages`, `1,200 rows`: a count and its noun, which agree (`many`: the
    plural when it is not the noun with an `s`)."""
    return f"{count:,} {noun if count == 1 else many or noun + 's'}"
