"""The items of a big JSON list, one at a time, from a stream: a ChatGPT export is one document
that can pass a gigabyte, and parsing it whole costs several times that in memory.

One item can be huge too (a conversation holding a message of hundreds of megabytes, which a
zip compresses to almost nothing). With `longest`, a string longer than that many characters is
never held whole: it is read through and given as a short mark of its length (`cut_mark`),
which the reader then leaves out, saying so.
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Iterator
from typing import IO, Any, Final

CHUNK: Final = 256 * 1024
"""Bytes read at a time; an item longer than what is buffered doubles the next read, so that a
big item is parsed a few times at most, not once per chunk."""

_SPACE: Final = " \t\n\r"
_AFTER_NUMBER: Final = _SPACE + ",]"
_QUOTE_OR_ESCAPE: Final = re.compile(r'["\\]')
_CUT: Final = re.compile("\ue000cut:([0-9]+)\ue000")  # private-use marks: JSON keeps them as is


def cut_mark(chars: int) -> str:
    """What stands for a string of `chars` characters that was too long to read."""
    return f"\ue000cut:{chars}\ue000"


def cut_chars(text: str) -> int:
    """The characters of the strings cut from `text` (0 when none was)."""
    return sum(int(found.group(1)) for found in _CUT.finditer(text))


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


def list_items(
    stream: IO[bytes], chunk: int = CHUNK, *, longest: int | None = None
) -> Iterator[Any]:
    """Each item of the JSON list that `stream` holds (UTF-8, a byte order mark allowed); a
    string of more than `longest` characters is given as its `cut_mark`.

    NotAList when the document is something else, Damaged where it stops being JSON (the items
    before that are given first), UnicodeDecodeError for bytes that are not UTF-8,
    RecursionError for an item nested past the parser's stack."""
    buffer = _Buffer(stream, chunk, longest)
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

    def __init__(self, stream: IO[bytes], chunk: int, longest: int | None) -> None:
        self.stream = stream
        self.chunk = chunk
        self.longest = longest
        self.scan_at = 0  # how far `_cut_long_strings` has looked at the item
        self.string_at = -1  # where the string it is in starts (its quote), or -1
        self.string_chars = 0  # the characters of that string so far
        self.decoder = codecs.getincrementaldecoder("utf-8-sig")()
        self.json = json.JSONDecoder()
        self.text = ""
        self.pos = 0
        self.lines_before = 0
        self.ended = False

    def fill(self, size: int) -> None:
        self.text += self.read(size)

    def read(self, size: int) -> str:
        data = self.stream.read(size)
        self.ended = not data
        return self.decoder.decode(data, final=self.ended)

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
        self.scan_at, self.string_at = self.pos, -1
        while True:
            if self.longest is not None and len(self.text) - self.pos > self.longest:
                self._cut_long_strings(self.longest)
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

    def _cut_long_strings(self, longest: int) -> None:
        """Look at the item read so far, from where the last look stopped; a string longer than
        `longest` is replaced by its mark, the rest of it read through without being kept. Only
        an item longer than `longest` is looked at: the others cost nothing more."""
        while self.scan_at < len(self.text):
            if self.string_at < 0:
                quote = self.text.find('"', self.scan_at)
                if quote < 0:
                    self.scan_at = len(self.text)
                    return
                self.string_at, self.string_chars, self.scan_at = quote, 0, quote + 1
            stop, count, closed = self._run(self.text, self.scan_at)
            self.string_chars += count
            self.scan_at = stop
            if self.string_chars > longest and not self._a_mark(closed):
                self._cut(closed)
            elif closed:
                self.string_at = -1
            else:
                return  # the string goes on past what was read

    def _a_mark(self, closed: bool) -> bool:
        """Whether the string is a mark already (a look may go past its item and cut a string
        of the next one, which is looked at again)."""
        return (
            closed and _CUT.fullmatch(self.text, self.string_at + 1, self.scan_at - 1) is not None
        )

    def _cut(self, closed: bool) -> None:
        """Replace the string being looked at by its mark, reading the rest of it first."""
        chars, rest = self.string_chars, self.text[self.scan_at :]
        if not closed:
            chars, rest = self._read_through(rest, chars)
        mark = json.dumps(cut_mark(chars), ensure_ascii=False)
        self.text = self.text[: self.string_at] + mark + rest
        self.scan_at, self.string_at = self.string_at + len(mark), -1

    def _read_through(self, rest: str, chars: int) -> tuple[int, str]:
        """Read the stream to the end of the string `rest` is inside of, a chunk at a time:
        (the string's characters in all, what follows its closing quote)."""
        while True:
            stop, count, closed = self._run(rest, 0)
            chars += count
            if closed:
                return chars, rest[stop:]
            if self.ended:
                raise self.damaged("unterminated string", self.string_at)
            rest = rest[stop:] + self.read(self.chunk)

    def _run(self, text: str, at: int) -> tuple[int, int, bool]:
        try:
            return _string_run(text, at)
        except ValueError as error:  # a control character, a bad escape
            raise self.damaged(f"invalid string ({error})", self.string_at) from None

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


def _string_run(text: str, at: int) -> tuple[int, int, bool]:
    """Read a JSON string from `at`, inside it: (where reading stopped, the characters decoded
    up to there, whether the string ended, reading then stopping past its closing quote). It
    stops before an escape that `text` cuts short. ValueError for what is no JSON string."""
    quote = _closing_quote(text, at)
    stop = quote if quote >= 0 else _safe_end(text, at)
    count = _decoded_length(text, at, stop)
    return (quote + 1, count, True) if quote >= 0 else (stop, count, False)


def _closing_quote(text: str, at: int) -> int:
    quote = text.find('"', at)
    while quote >= 0 and _escaped(text, at, quote):
        quote = text.find('"', quote + 1)
    return quote


def _escaped(text: str, at: int, index: int) -> bool:
    """Whether an odd run of backslashes (back to `at`) stands before `index`."""
    run = index
    while run > at and text[run - 1] == "\\":
        run -= 1
    return (index - run) % 2 == 1


def _safe_end(text: str, at: int) -> int:
    """The end of `text`, or the start of an escape there that it cuts short (a surrogate
    pair's first half is known to be one only once the next escape is read)."""
    end = len(text)
    for index in range(max(at, end - 11), end):
        if text[index] == "\\" and not _escaped(text, at, index) and not _escape_width(text, index):
            return index
    return end


def _decoded_length(text: str, at: int, stop: int) -> int:
    """The characters that `text[at:stop]`, whole escapes, decodes to (at C speed)."""
    if text.find("\\", at, stop) < 0:
        return stop - at
    return len(json.loads('"' + text[at:stop] + '"'))


def _escape_width(text: str, start: int) -> int:
    """The characters of the escape at `start`, which decodes to one character (a surrogate
    pair too); 0 when `text` ends before it is known."""
    if start + 2 > len(text):
        return 0
    if text[start + 1] != "u":
        return 2
    if start + 6 > len(text):
        return 0
    if not 0xD800 <= _hex(text[start + 2 : start + 6]) < 0xDC00:
        return 6
    after = text[start + 6 : start + 8]
    if after != "\\u"[: len(after)]:
        return 6  # a lone high surrogate
    if start + 12 > len(text):
        return 0
    return 12 if 0xDC00 <= _hex(text[start + 8 : start + 12]) < 0xE000 else 6


def _hex(digits: str) -> int:
    try:
        return int(digits, 16)
    except ValueError:
        return -1  # not JSON: the parser says so
