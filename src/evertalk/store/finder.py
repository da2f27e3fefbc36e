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
DEPTH = 3
"""JSON strings inside JSON strings followed at most: a file's JSON in a tool call's input in
a record is two."""


class Finder:
    """Finds and replaces one text (or the texts of forgotten messages, or a pattern)."""

    def __init__(
        self, needles: Iterable[str], into: str, *, pattern: str | None = None, plain: bool = True
    ) -> None:
        wanted = {needle for needle in needles if needle}
        self.into = into
        self._encoded = tuple(sorted(text for text in wanted if _encodable(text))) if plain else ()
        forms = {form for text in wanted for form in escaped_forms(text)}
        branches = [re.escape(form) for form in sorted(forms, key=len, reverse=True)]
        if pattern is not None:
            branches.append(f"(?:{pattern})")
        self._pattern = re.compile("|".join(branches)) if branches else None

    @classmethod
    def text(cls, text: str) -> Finder:
        """Each occurrence of `text`, in any of its forms, as `[redacted]`."""
        return cls([text], REDACTED)

    @classmethod
    def regex(cls, pattern: str) -> Finder:
        """Each match of the regular expression as `[redacted]`."""
        return cls([], REDACTED, pattern=pattern, plain=False)

    @classmethod
    def texts(cls, texts: Iterable[str], into: str) -> Finder:
        """Each of the forgotten messages' texts as `into` (the marker)."""
        return cls(texts, into)

    def replace(self, text: str) -> str:
        return self._finish(_apply(text, self.spans(text)))

    def holds(self, text: str) -> bool:
        return self.replace(text) != text

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
        if self._pattern is None:
            return []
        raw = [
            (m.start(), m.end(), self.into)
            for m in self._pattern.finditer(text)
            if m.end() > m.start()
        ]
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
                spans = [s for s in spans if not start <= s[0] < end] + [(start, end, new)]
        return sorted(spans)

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
