"""The items of a big JSON list, one at a time, from a stream: a ChatGPT export is one document
that can pass a gigabyte, and parsing it whole costs several times that in memory."""

from __future__ import annotations

import codecs
import json
from collections.abc import Iterator
from typing import IO, Any, Final

CHUNK: Final = 256 * 1024
"""Bytes read at a time; an item longer than what is buffered doubles the next read, so that a
big item is parsed a few times at most, not once per chunk."""

_SPACE: Final = " \t\n\r"
_AFTER_NUMBER: Final = _SPACE + ",]"


class NotAList(ValueError):
    """The document is valid so far but is not a list: `start` is its first character."""

    def __init__(self, start: str) -> None:
        super().__init__(f"the document starts with {start!r}, not a list")
        self.start = start


class Damaged(ValueError):
    """The document is not valid JSON: `why` in words, at `line` of the stream."""

    def __init__(self, why: str, line: int) -> None:
        super().__init__(f"{why} (line {line})")
        self.why = why
        self.line = line


def list_items(stream: IO[bytes], chunk: int = CHUNK) -> Iterator[Any]:
    """Each item of the JSON list that `stream` holds (UTF-8, a byte order mark allowed).

    NotAList when the document is something else, Damaged where it stops being JSON (the items
    before that are given first), UnicodeDecodeError for bytes that are not UTF-8,
    RecursionError for an item nested past the parser's stack."""
    buffer = _Buffer(stream, chunk)
    if buffer.next_char() != "[":
        raise NotAList(buffer.next_char())
    buffer.pos += 1
    if buffer.next_char() == "]":
        buffer.pos += 1
    else:
        while True:
            yield buffer.value()
            found = buffer.next_char()
            buffer.pos += 1
            if found == "]":
                break
            if found != ",":
                raise buffer.damaged("expecting ',' or ']' after an item")
            buffer.forget()
    if buffer.next_char():
        raise buffer.damaged("extra data after the list")


class _Buffer:
    """Decoded text of the stream from the item being read on; the lines it has let go of."""

    def __init__(self, stream: IO[bytes], chunk: int) -> None:
        self.stream = stream
        self.chunk = chunk
        self.decoder = codecs.getincrementaldecoder("utf-8-sig")()
        self.json = json.JSONDecoder()
        self.text = ""
        self.pos = 0
        self.lines_before = 0
        self.ended = False

    def fill(self, size: int) -> None:
        data = self.stream.read(size)
        self.ended = not data
        self.text += self.decoder.decode(data, final=self.ended)

    def next_char(self) -> str:
        """The next character that is not white space (it stays unread), or '' at the end."""
        while True:
            while self.pos < len(self.text) and self.text[self.pos] in _SPACE:
                self.pos += 1
            if self.pos < len(self.text) or self.ended:
                return self.text[self.pos : self.pos + 1]
            self.fill(self.chunk)

    def value(self) -> Any:
        self.next_char()
        while True:
            try:
                value, end = self.json.raw_decode(self.text, self.pos)
            except json.JSONDecodeError as error:
                if self.ended:
                    raise self.damaged(error.msg, error.pos) from None
            else:
                if self.ended or not self._may_go_on(value, end):
                    self.pos = end
                    return value
            self.fill(max(self.chunk, len(self.text) - self.pos))

    def _may_go_on(self, value: object, end: int) -> bool:
        """Whether the item may be longer than the buffer shows: a number the buffer cuts
        (`0.` of `0.5`) parses as a shorter one."""
        if isinstance(value, bool) or not isinstance(value, int | float):
            return False
        return end >= len(self.text) or self.text[end] not in _AFTER_NUMBER

    def forget(self) -> None:
        """Drop the text already read, once it is most of the buffer (so that dropping stays
        linear in the document's size)."""
        if self.pos > self.chunk and self.pos * 2 > len(self.text):
            self.lines_before += self.text.count("\n", 0, self.pos)
            self.text = self.text[self.pos :]
            self.pos = 0

    def damaged(self, why: str, at: int | None = None) -> Damaged:
        at = self.pos if at is None else at
        line = self.lines_before + self.text.count("\n", 0, at) + 1
        return Damaged(why[:1].lower() + why[1:], line)
