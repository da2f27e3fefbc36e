"""Message and tree records: the JSON objects of the log's lines (SPEC §1.2, §2.2)."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeGuard

from evertalk.memory.text import KINDS, LINE_LIMIT
from evertalk.memory.tree import BUILT, CUT, FREE
from evertalk.store.line_files import parse_object


@dataclass(frozen=True, slots=True)
class MessageRecord:
    """A message line of the log (SPEC §1.2), its `size` that of its text in UTF-8."""

    i: int
    kind: str
    text: str
    size: int
    date: str
    key: str | None = None
    images: tuple[str, ...] | None = None
    agent: str | None = None
    page: Page | None = None
    failed: bool = False  # an `echo` of a tool call that failed (absent from the line if not)


@dataclass(frozen=True, slots=True)
class Page:
    """Where a page of a long message stands in its group (SPEC §1.6): page `part` of `parts`.

    A group is written in one append, so a reader that finds it incomplete knows that append
    never returned, and skips the pages it has, as it would a torn line.
    """

    part: int
    parts: int


@dataclass(frozen=True, slots=True)
class NodeRecord:
    """A line of the tree (SPEC §2.2): node (l, i), its text, the text's size in UTF-8 and the
    flag the line gives it (1 built by the model, 2 free, 3 cut)."""

    l: int  # noqa: E741 - the spec's name for a level
    i: int
    text: str
    size: int
    flag: int


def _dumps(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj, ensure_ascii=False).encode("utf-8")


def _utf8_size(text: str) -> int:
    try:
        return len(text.encode("utf-8"))
    except UnicodeEncodeError:
        raise ValueError("the text is not valid Unicode (it holds a lone surrogate)") from None


def encode_message(
    i: int,
    kind: str,
    text: str,
    date: str,
    key: str | None = None,
    images: Sequence[str] | None = None,
    agent: str | None = None,
    page: Page | None = None,
    failed: bool = False,
) -> bytes:
    """One message line, without its newline; the keys in the order SPEC §1.2 gives. `failed`
    is written only when true, so that a line of a call that worked reads as lines always did."""
    if kind not in KINDS:
        raise ValueError(f"unknown message kind {kind!r}")
    obj: dict[str, Any] = {"i": i, "kind": kind, "text": text, "size": _utf8_size(text)}
    obj["date"] = date
    if key is not None:
        obj["key"] = key
    if images is not None:
        obj["images"] = list(images)
    if agent is not None:
        obj["agent"] = agent
    if failed:
        obj["failed"] = True
    if page is not None:
        obj["part"], obj["parts"] = page.part, page.parts
    return _dumps(obj)


def encode_node(l: int, i: int, text: str, flag: int) -> bytes:  # noqa: E741
    """One tree line, without its newline: `{l, i, text, size}` plus `free` or `cut`."""
    if flag not in (BUILT, FREE, CUT):
        raise ValueError(f"a node's flag is 1, 2 or 3, not {flag!r}")
    size = _utf8_size(text)
    if size > LINE_LIMIT:
        raise ValueError(f"a node's text is at most {LINE_LIMIT} bytes, not {size}")
    obj: dict[str, Any] = {"l": l, "i": i, "text": text, "size": size}
    if flag == FREE:
        obj["free"] = True
    elif flag == CUT:
        obj["cut"] = True
    return _dumps(obj)


def _is_count(value: object) -> TypeGuard[int]:
    """A non-negative int; JSON's true and false are not counts (`type`, not isinstance)."""
    return type(value) is int and value >= 0


def _page(obj: dict[str, Any]) -> Page | Literal[False] | None:
    """The record's page; None for a whole message; False when the keys are malformed (a page
    that cannot be placed in its group cannot be trusted to be whole)."""
    part, parts = obj.get("part"), obj.get("parts")
    if part is None and parts is None:
        return None
    if _is_count(part) and _is_count(parts) and part < parts and parts >= 2:
        return Page(part, parts)
    return False


def _optional_str(value: object) -> str | None:
    return value if isinstance(value, str) else None


def _images(value: object) -> tuple[str, ...] | None:
    if isinstance(value, list) and all(isinstance(name, str) for name in value):
        return tuple(value)
    return None


def _true_size(obj: dict[str, Any], text: str) -> int | None:
    """The text's real byte size: a stored `size` is checked for type, the text is the truth."""
    if not _is_count(obj.get("size")):
        return None
    if text.isascii():  # the common case, without encoding a copy
        return len(text)
    try:
        return len(text.encode("utf-8"))
    except UnicodeEncodeError:  # a JSON escape of a lone surrogate
        return None


def decode_message(obj: dict[str, Any]) -> MessageRecord | None:
    """The message in `obj`, or None when a required key is missing or of the wrong type.

    A malformed optional key is dropped rather than losing the whole message to it.
    """
    i, kind, text, date = obj.get("i"), obj.get("kind"), obj.get("text"), obj.get("date")
    if not _is_count(i) or not isinstance(kind, str) or kind not in KINDS:
        return None
    if not isinstance(text, str) or not isinstance(date, str):
        return None
    size = _true_size(obj, text)
    page = _page(obj)
    if size is None or page is False:
        return None
    return MessageRecord(
        i,
        kind,
        text,
        size,
        date,
        key=_optional_str(obj.get("key")),
        images=_images(obj.get("images")),
        agent=_optional_str(obj.get("agent")),
        page=page,
        failed=obj.get("failed") is True,
    )


def decode_node(obj: dict[str, Any]) -> NodeRecord | None:
    """The node in `obj`, or None when it is not a well-formed tree record.

    A node's text is one line of at most LINE_LIMIT bytes (SPEC §4.4); a longer one was never
    written by evertalk, and the index relies on the limit to tell damaged files.
    """
    level, index = obj.get("l"), obj.get("i")
    text, free, cut = obj.get("text"), obj.get("free", False), obj.get("cut", False)
    if not _is_count(level) or not _is_count(index) or not isinstance(text, str):
        return None
    if not isinstance(free, bool) or not isinstance(cut, bool) or (free and cut):
        return None
    size = _true_size(obj, text)
    if size is None or size > LINE_LIMIT:
        return None
    flag = FREE if free else CUT if cut else BUILT
    return NodeRecord(level, index, text, size, flag)


def read_message_line(raw: bytes) -> MessageRecord | str:
    """The message on a line of a message file (without its newline), or why it holds none.

    This is the definition that the fast decoder (fast_lines.py) agrees with on every line it
    accepts.
    """
    parsed = parse_object(raw)
    if type(parsed) is dict:
        return decode_message(parsed) or "not a valid message record"
    return parsed if isinstance(parsed, str) else "not a JSON object"


def read_node_line(raw: bytes) -> NodeRecord | str:
    """The node on a line of a tree file (without its newline), or why it holds none."""
    parsed = parse_object(raw)
    if type(parsed) is dict:
        return decode_node(parsed) or "not a valid tree record"
    return parsed if isinstance(parsed, str) else "not a JSON object"


NODE_LEVELS = 63
"""Levels 0 … 62: a node of a higher level would need 1 << 63 messages, so a record of one
names messages past the log's end, which the rebuild checks by level (see fast_lines.py)."""


_CLAIMED_ID = rb'\{\s*"i"\s*:\s*(\d{1,18})\s*,'
"""Compiled (and kept by `re`) at the first damaged line, not at every open."""


def claimed_id(raw: bytes) -> int | None:
    """The id a damaged message line still shows at its start (`{"i": 41, …`), if any."""
    found = re.match(_CLAIMED_ID, raw)
    return int(found.group(1)) if found else None
