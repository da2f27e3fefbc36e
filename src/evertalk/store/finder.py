"""Where a text that a forget takes out lies in another text (SPEC §12): as it is, JSON-escaped
(a tool call's input is JSON inside the log's JSON, so a newline shows as `\\n`, a quote as
`\\"`, and any character may be a `\\uXXXX`), inside any JSON string as it decodes, and across
the pages of a long message. A `Finder` replaces each place by its replacement, then the encoded
forms of a plain text that redaction.py knows (reversed, hex, base64…) by `[redacted]`.

Strings read from damaged files hold lone surrogates (bytes that are not UTF-8, decoded with
surrogate escapes): nothing here encodes them.
"""

from __future__ import annotations

import json
import re
from bisect import bisect_right
from collections.abc import Iterable, Sequence

from evertalk.redaction import REDACTED, SECRET_MIN_LENGTH, redact

Span = tuple[int, int, str]
"""(start, end, what goes in its place)."""

_LITERAL = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
"""A JSON string, quotes included."""
ENCODED = (8, 200)
"""The forgotten texts whose encoded forms are sought: the 8 shortest of at most 200 characters.
A key pasted alone, a password, a line is what a command encodes; redaction.py builds one
pattern of all the forms of all its texts, made for a few keys, and for many texts or long ones
it costs seconds and gigabytes (a forget of 20 messages of 600 characters ran out of 4 GB)."""
UTF16 = ("utf-16-le", "utf-16-be")
DEPTH = 3
"""JSON strings inside JSON strings followed at most: a file's JSON in a tool call's input in
a record is two."""


class Finder:
    """Finds and replaces one text (or the texts of forgotten messages, or a pattern)."""

    def __init__(
        self,
        needles: Iterable[str],
        into: str,
        *,
        pattern: str | None = None,
        encoded: Sequence[str] = (),
    ) -> None:
        """`needles` as they stand and escaped, a pattern's matches, and the `encoded` texts'
        encoded forms."""
        wanted = {needle for needle in needles if needle}
        self.into = into
        self._encoded = tuple(sorted(text for text in set(encoded) if _encodable(text)))
        self._utf16 = [text.encode(code, "surrogatepass") for text in wanted for code in UTF16]
        forms = {form for text in wanted for form in escaped_forms(text)}
        self._forms = sorted(forms, key=len, reverse=True)  # searched one by one: there may
        # be thousands (a forget of many messages), too many for one expression's branches
        self._pattern = None if pattern is None else re.compile(pattern)

    @classmethod
    def text(cls, text: str) -> Finder:
        """Each occurrence of `text`, in any of its forms, as `[redacted]`."""
        return cls([text], REDACTED, encoded=[text])

    @classmethod
    def regex(cls, pattern: str) -> Finder:
        """Each match of the regular expression as `[redacted]`."""
        return cls([], REDACTED, pattern=pattern)

    @classmethod
    def texts(cls, texts: Sequence[str], into: str) -> Finder:
        """Each of the forgotten messages' texts as `into` (the marker), and the encoded forms
        of a few short ones as `[redacted]` (see ENCODED)."""
        short = sorted({text for text in texts if len(text) <= ENCODED[1]}, key=len)
        return cls(texts, into, encoded=short[: ENCODED[0]])

    def replace(self, text: str) -> str:
        return self._finish(_apply(text, self.spans(text)))

    def holds(self, text: str) -> bool:
        return self.replace(text) != text

    def holds_bytes(self, data: bytes) -> bool:
        """Whether a file's bytes hold what is sought, as UTF-8 (or bytes that are not text)
        or as UTF-16, as a file that is dropped whole, not rewritten, may."""
        if any(form in data for form in self._utf16):
            return True
        return self.holds(data.decode("utf-8", "surrogateescape"))

    def replace_pages(self, pages: Sequence[str]) -> list[str]:
        """The pages of one message with what they hold replaced, an occurrence that runs over
        a page's end too: its replacement goes where most of it was."""
        if len(pages) == 1:
            return [self.replace(pages[0])]
        joined = "".join(pages)
        starts, at = [], 0
        for page in pages:
            starts.append(at)
            at += len(page)
        return [self._finish(page) for page in _split(joined, starts, self.spans(joined))]

    def spans(self, text: str, depth: int = 0) -> list[Span]:
        """Where `text` holds what is sought: the forms themselves, and the JSON strings whose
        decoded value holds them (such a string is written again, its value replaced)."""
        raw = self._found(text)
        if "\\" not in text or depth >= DEPTH:
            return raw
        spans = raw
        for match in _LITERAL.finditer(text):
            start, end = match.span()
            literal = match.group()
            if "\\" not in literal or _crossed(raw, start, end):
                continue
            new = self._literal(literal, depth)
            if new is not None:
                spans = [s for s in spans if not start <= s[0] < end]
                spans.append(_narrowed(start, literal, new))
        return sorted(spans)

    def _found(self, text: str) -> list[Span]:
        """The forms and matches as they stand in `text`: where two overlap, the first, and
        the longer of two that start together."""
        found: list[tuple[int, int]] = []
        for form in self._forms:
            at = text.find(form)
            while at >= 0:
                found.append((at, at + len(form)))
                at = text.find(form, at + len(form))
        if self._pattern is not None:
            found += [m.span() for m in self._pattern.finditer(text) if m.end() > m.start()]
        spans: list[Span] = []
        for start, end in sorted(found, key=lambda span: (span[0], -span[1])):
            if not spans or start >= spans[-1][1]:
                spans.append((start, end, self.into))
        return spans

    def _literal(self, literal: str, depth: int) -> str | None:
        """The JSON string `literal` written again with its value replaced; None when its value
        holds nothing sought, or it is no JSON string."""
        try:
            value = json.loads(literal, strict=False)
        except ValueError:
            return None
        if not isinstance(value, str):
            return None
        new = _apply(value, self.spans(value, depth + 1))
        new = self._finish(new)
        if new == value:
            return None
        return json.dumps(new, ensure_ascii=literal.isascii() and not value.isascii())

    def _finish(self, text: str) -> str:
        return redact(text, self._encoded) if self._encoded else text


def input_strings(text: str) -> list[str]:
    """The strings of a tool call's input (`name {…}`), but a `path`: what the call wrote
    lies in these, while its file's name is how other messages name that file."""
    _, _, rest = text.partition(" ")
    try:
        value = json.loads(rest)
    except (ValueError, RecursionError):
        return []
    found: list[str] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str) and len(item) >= SECRET_MIN_LENGTH:
            found.append(item)
        elif isinstance(item, list):
            stack += item
        elif isinstance(item, dict):
            stack += [v for k, v in item.items() if k != "path"]
    return found


def escaped_forms(text: str) -> set[str]:
    """The text as it is and as a JSON string holds it, once or twice escaped, with and
    without `\\uXXXX` for the characters beyond ASCII."""
    forms = {text}
    for ascii_only in (False, True):
        once = _escaped(text, ascii_only)
        forms.update((once, _escaped(once, ascii_only)))
    return forms


def _escaped(text: str, ascii_only: bool) -> str:
    return json.dumps(text, ensure_ascii=ascii_only)[1:-1]


def _narrowed(start: int, old: str, new: str) -> Span:
    """The span that replaces `old` (at `start`) by `new`, less what the two share at either
    end: a long string over a page boundary keeps its pages as they were around the change."""
    head = 0
    most = min(len(old), len(new))
    while head < most and old[head] == new[head]:
        head += 1
    tail = 0
    while tail < most - head and old[-1 - tail] == new[-1 - tail]:
        tail += 1
    return start + head, start + len(old) - tail, new[head : len(new) - tail]


def _crossed(spans: list[Span], start: int, end: int) -> bool:
    """Whether a span runs over the string's start or end (it holds more than the string)."""
    return any(s < end and e > start and not (start <= s and e <= end) for s, e, _ in spans)


def _apply(text: str, spans: list[Span]) -> str:
    if not spans:
        return text
    out, at = [], 0
    for start, end, new in spans:
        out += [text[at:start], new]
        at = end
    out.append(text[at:])
    return "".join(out)


def _split(joined: str, starts: list[int], spans: list[Span]) -> list[str]:
    """The pages (starting at `starts` in `joined`) with `spans` applied."""
    pages: list[list[str]] = [[] for _ in starts]
    ends = [*starts[1:], len(joined)]

    def keep(start: int, end: int) -> None:
        for n in range(bisect_right(starts, start) - 1, len(starts)):
            if starts[n] >= end:
                return
            piece = joined[max(start, starts[n]) : min(end, ends[n])]
            if piece:
                pages[n].append(piece)

    at = 0
    for start, end, new in spans:
        keep(at, start)
        held = [min(end, ends[n]) - max(start, starts[n]) for n in range(len(starts))]
        pages[held.index(max(held))].append(new)
        at = end
    keep(at, len(joined))
    return ["".join(page) for page in pages]


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


__all__ = ["Finder", "escaped_forms", "input_strings"]
