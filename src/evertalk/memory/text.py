"""Text rules of the log and the tree: byte sizes, flattening, cutting, clipping, splitting."""

from __future__ import annotations

import re

LINE_LIMIT = 512
"""The size target of one summary line, in UTF-8 bytes (SPEC §2.1)."""

PLACEHOLDER = "(not summarized yet: zoom it)"
PLACEHOLDER_SIZE = len(PLACEHOLDER.encode())  # 29: what an unbuilt line costs (SPEC §3.1)

KINDS = frozenset({"user", "ever", "tool", "echo", "work", "note"})
"""The kinds of message (SPEC §1.2)."""

MESSAGE_LIMIT = 30_000
"""Longest text of one message, in characters (SPEC §1.5, §1.6)."""

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
_SPLIT_WINDOW_START = 24_000  # a piece may end after any of its characters 24,001 … 30,000


def utf8_len(text: str) -> int:
    # surrogatepass: a lone surrogate from JSON input must not crash size accounting
    return len(text.encode("utf-8", "surrogatepass"))


def valid_unicode(text: str) -> str:
    """`text` with each lone surrogate (which UTF-8 cannot encode) replaced by U+FFFD."""
    return text if text.isascii() else _LONE_SURROGATE.sub("\ufffd", text)


def flatten(text: str) -> str:
    """One line: each \\r\\n, \\r and \\n (matched in that order) becomes one space."""
    return text.replace("\r\n", " ").replace("\r", " ").replace("\n", " ")


def cut_utf8(text: str, limit: int = LINE_LIMIT) -> str:
    """The longest prefix of `text` whose UTF-8 encoding fits in `limit` bytes."""
    data = text.encode("utf-8", "surrogatepass")
    if len(data) <= limit:
        return text
    # drop the partial character at the cut, if any: at most three bytes of it
    for end in range(limit, limit - 4, -1):
        try:
            return data[:end].decode("utf-8", "surrogatepass")
        except UnicodeDecodeError:
            continue
    raise AssertionError("unreachable: a UTF-8 character is at most four bytes")


def leaf_input(kind: str, text: str) -> str:
    """What a leaf condenses: `kind: text`, whole (SPEC §2.1)."""
    return f"{kind}: {text}"


def merge_input(left: str, right: str) -> str:
    """What a parent condenses: its children's texts joined by one newline (SPEC §2.1)."""
    return f"{left}\n{right}"


def clip_note(cut: int) -> str:
    return f"[... {cut} characters cut from the middle of this output ...]"


def clip_output(text: str, limit: int = MESSAGE_LIMIT) -> str:
    """Head + note + tail of a tool output, at most `limit` characters in all (SPEC §1.5)."""
    total = len(text)
    if total <= limit:
        return text
    head, tail, cut = clip_shape(total, limit)
    return f"{text[:head]}\n{clip_note(cut)}\n{text[total - tail :]}"


def clip_shape(total: int, limit: int = MESSAGE_LIMIT) -> tuple[int, int, int]:
    """(head, tail, cut) of `clip_output` for a text of `total` characters longer than `limit`
    (a `ClipBuffer` clips with it too). A fixed point: the note's length depends on the count it
    states."""
    cut = total  # start high: the note only gets shorter as the count drops
    while True:
        keep = limit - 2 - len(clip_note(cut))
        if total - keep == cut:
            break
        cut = total - keep
    head = (keep + 1) // 2
    return head, keep - head, cut


def split_text(text: str, limit: int = MESSAGE_LIMIT) -> list[str]:
    """Consecutive pieces of at most `limit` characters that concatenate to `text` (SPEC §1.6)."""
    pieces: list[str] = []
    rest = text
    window = max(0, limit - (MESSAGE_LIMIT - _SPLIT_WINDOW_START))
    while len(rest) > limit:
        end = _piece_end(rest, window, limit)
        pieces.append(rest[:end])
        rest = rest[end:]
    pieces.append(rest)
    return pieces


def _piece_end(text: str, window: int, limit: int) -> int:
    for mark in ("\n", " "):
        found = text.rfind(mark, window, limit)
        if found >= 0:
            return found + 1
    return limit
