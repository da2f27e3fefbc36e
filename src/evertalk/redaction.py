"""Keeping known secrets out of what is logged and shown: `redact(text, secrets)`.

Each secret long enough to be a real key is replaced by `[redacted]` as it is, and also in the
forms a command can easily turn it into: reversed, rot13, hex (either case), base32, and base64
in the standard and the URL-safe alphabet, of the secret and of its reverse, and that base64
reversed. Base64 and base32 are matched at each byte offset a secret can have inside a longer
encoded stream (`base64 <<< "prefix$KEY"` encodes the key differently from `base64 <<< "$KEY"`):
the characters that depend on the secret's bytes alone are the same at any given offset, and
those are what is replaced. Any form may have spaces between its characters (`sed 's/./& /g'`)
and line breaks, as `base64` and `xxd -p` wrap their output, each perhaps followed by a dump's
offset (`od -c`).

Hex dumps (`xxd`, `od`, `hexdump`) show the secret's bytes as hex or octal, one by one or in
words (in the machine's byte order, as `od -x` prints them), in rows that start with an offset
and may end with a column of the bytes as text, where the secret is in plain sight split over
rows. For those forms the rest of each row the secret touches goes too, text column included.
`rev` turns each row of a wrapped encoding around; a text in which half of an encoded form shows
turned around is also matched with each of its lines reversed.

This is defence in depth: a command can always encode a key some other way (compressed or
encrypted, no pattern can know it); the shell's sandbox is what keeps it from reading the key at
all. It runs on every log write and every tool result, so the patterns are built once per set of
secrets, and a text none of them can match (the usual case) is let through after a few substring
searches, without running the regular expression.
"""

from __future__ import annotations

import base64
import binascii
import codecs
import re
import sys
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from functools import lru_cache
from typing import Final

REDACTED: Final = "[redacted]"
SECRET_MIN_LENGTH: Final = 8
"""Shorter values are not redacted, as they are or encoded: they would blank out parts of
ordinary words (a local server's placeholder key `local` made `localhost` read `[redacted]host`
in every connection error, and the log keeps what it garbles forever), and are no real key."""

_OFFSET: Final = r"[ \t]*(?:[0-9a-fA-F]{4,}:?[ \t]+)?"
"""What may start a row after a line break: a dump's offset (`00000010: `, `0000020 `)."""

_BREAK: Final = rf"[ \t]*(?:\r?\n{_OFFSET})?"
"""What may stand between two characters of a form: spaces, and one line break."""

_GAP: Final = re.compile(r"[\s,;:\u200b-\u200d\u2060\ufeff]")
"""What a command may put between a form's characters, besides spaces and line breaks: commas,
semicolons, colons (`sed 's/./&,/g'`, hex joined by `:`), blank lines, and the zero-width
characters that do not show. The expression does not know them (each would make it much larger
to build); `Redactor._cut_spread` finds the forms in the text without them."""
_GAPS: Final = re.compile(_GAP.pattern + "+")

_DUMP_BREAK: Final = rf"[ \t]*(?:[^\n]*\r?\n{_OFFSET})??"
"""What may stand between two units of a dump: spaces, or the rest of the row (its text column)
and the next row's offset."""

_DUMP_ROW: Final = re.compile(
    r"^[ \t]*[0-9a-fA-F]{4,}:?(?:(?:[ \t]+[0-9a-fA-F]{2,16}){2}|(?:[ \t]+\S{1,4}){8})", re.M
)
"""A row that looks like a dump's: an offset, then hex or octal, or short columns (`od -c`)."""

MIN_DUMP_BYTES: Final = 6
"""A dump form covering fewer of the secret's bytes (a word size and offset that leave it few
whole words) would match by chance; it is left out."""


@dataclass(frozen=True)
class Redactor:
    """The compiled patterns of one set of secrets."""

    exact: tuple[str, ...]  # forms matched case-sensitively (without spaces or line breaks)
    folded: tuple[str, ...]  # lower-cased forms matched in any case (hex)
    turned: tuple[str, ...]  # halves of wrapped forms, reversed: `base64 | rev` shows them
    pattern: re.Pattern[str] | None
    spread: tuple[str, ...] = ()  # forms found in the text without its gaps (`_GAP`)
    spread_folded: tuple[str, ...] = ()  # … in any case (escapes, numbers, the key itself)

    def apply(self, text: str) -> str:
        if self.pattern is None:
            return text
        flat = _GAPS.sub("", text)
        lower = flat.lower()
        if self._holds(flat, lower) or _DUMP_ROW.search(text):
            text = self.pattern.sub(REDACTED, text)
        if any(half in flat for half in self.turned):
            text = self._apply_turned(text)
        spread = any(form in flat for form in self.spread)
        if spread or any(form in lower for form in self.spread_folded):
            text = self._cut_spread(text)
        return text

    def _cut_spread(self, text: str) -> str:
        """`text` with each spread form replaced, found where the gaps between its characters
        are left out; the whole stretch it covers goes, gaps included."""
        kept = [(at, char) for at, char in enumerate(text) if not _GAP.match(char)]
        flat = "".join(char for _, char in kept)
        lower = flat.lower()
        spans = [
            (kept[start][0], kept[start + len(form) - 1][0] + 1)
            for forms, seen in ((self.spread, flat), (self.spread_folded, lower))
            for form in forms
            for start in _occurrences(seen, form)
        ]
        return _cut(text, spans) if spans else text

    def _holds(self, flat: str, lower: str) -> bool:
        """Whether a form occurs once the gaps are ignored: plain substring searches, much
        faster than the expression, which then finds exactly where."""
        return any(form in flat for form in self.exact) or any(
            form in lower for form in self.folded
        )

    def _apply_turned(self, text: str) -> str:
        """`text` with what matches once each line is turned around replaced, in place."""
        assert self.pattern is not None
        lines = text.split("\n")
        turned = "\n".join(line[::-1] for line in lines)
        cuts: dict[int, list[tuple[int, int]]] = {}
        for match in self.pattern.finditer(turned):
            for row, start, end in _rows(lines, match.start(), match.end()):
                width = len(lines[row])
                cuts.setdefault(row, []).append((width - end, width - start))
        for row, spans in cuts.items():
            lines[row] = _cut(lines[row], spans)
        return "\n".join(lines)


def _rows(lines: list[str], start: int, end: int) -> Iterator[tuple[int, int, int]]:
    """The (line, start, end) columns that the span start…end of the joined lines covers."""
    at = 0
    for row, line in enumerate(lines):
        stop = at + len(line)
        if start <= stop and end > at:
            yield row, max(start, at) - at, min(end, stop) - at
        at = stop + 1


def _cut(line: str, spans: list[tuple[int, int]]) -> str:
    """`line` with each span replaced by REDACTED (overlapping spans as one)."""
    out: list[str] = []
    at = 0
    for start, end in sorted(spans):
        if end <= at:
            continue
        if start >= at:
            out.append(line[at:start])
        elif out and out[-1] == REDACTED:
            out.pop()
        out.append(REDACTED)
        at = max(at, end)
    out.append(line[at:])
    return "".join(out)


def redact(text: str, secrets: Iterable[str]) -> str:
    """`text` with each of `secrets`, and each of its encodings, replaced by `[redacted]`; a
    value shorter than SECRET_MIN_LENGTH is left alone."""
    wanted = tuple(secrets)
    if not wanted:
        return text
    return _redactor(wanted).apply(text)


@lru_cache(maxsize=16)
def _redactor(secrets: tuple[str, ...]) -> Redactor:
    exact: set[str] = set()
    folded: set[str] = set()
    wrapped: set[str] = set()
    dumps: set[tuple[str, ...]] = set()
    for secret in secrets:
        if len(secret) < SECRET_MIN_LENGTH:
            continue
        data = secret.encode("utf-8")
        exact.add(secret)
        exact.update(encoded_forms(secret))
        folded.add(data.hex())
        wrapped.update(wrapped_forms(data))
        dumps.update(dump_forms(data))
    # the longest first: at one position the alternation takes the first branch that matches,
    # so a key that contains another is replaced whole; a dump's rows after the plain forms
    branches = [_branch(form, fold=False) for form in _longest_first(exact)]
    branches += [_branch(form, fold=True) for form in _longest_first(folded)]
    branches += [_dump_branch(units) for units in sorted(dumps, key=len, reverse=True)]
    if not branches:
        return Redactor((), (), (), None)
    turned = {half[::-1] for form in wrapped for half in _halves(form)}
    kept = [secret for secret in secrets if len(secret) >= SECRET_MIN_LENGTH]
    spread = {form for s in kept for form in leading_forms(s.encode())}
    spread_folded = {form.lower() for s in kept for form in escaped_forms(s)}
    spread_folded.update(s.encode().hex() for s in kept)
    return Redactor(
        tuple(_flat(form) for form in exact),
        tuple(folded),
        tuple(turned),
        re.compile("|".join(branches)),
        tuple(_flat(form) for form in _longest_first(spread)),
        tuple(_flat(form) for form in _longest_first(spread_folded)),
    )


def _occurrences(text: str, form: str) -> Iterator[int]:
    """Where `form` starts in `text`, left to right, not overlapping."""
    if not form:
        return
    at = text.find(form)
    while at >= 0:
        yield at
        at = text.find(form, at + len(form))


def _longest_first(forms: set[str]) -> list[str]:
    return sorted(forms, key=len, reverse=True)


def _flat(form: str) -> str:
    return _GAP.sub("", form)


def _halves(form: str) -> tuple[str, str]:
    """Its first and last halves: wrapped in two rows, one of them shows whole."""
    half = -(-len(form) // 2)
    return form[:half], form[-half:]


def _branch(form: str, *, fold: bool) -> str:
    body = _BREAK.join(re.escape(char) for char in form)
    return f"(?i:{body})" if fold else body


def _dump_branch(units: tuple[str, ...]) -> str:
    body = _DUMP_BREAK.join(re.escape(unit) for unit in units)
    return f"(?i:{body})[^\\n]*"


def escaped_forms(secret: str) -> set[str]:
    """The secret a character or byte at a time, as escapes and numbers print it: itself in
    any case, `\\ooo` (printf, od -c), `\\xHH`, `%XX` (URLs), `\\uXXXX` (JSON), `0xHH`
    (C arrays), decimal bytes (`od -t u1`), and the repr of its UTF-16 bytes (`A\\x00`)."""
    data = secret.encode("utf-8")
    forms = {
        secret,
        "".join(f"\\{byte:03o}" for byte in data),
        "".join(f"\\x{byte:02x}" for byte in data),
        "".join(f"%{byte:02x}" for byte in data),
        "".join(f"\\u{ord(char):04x}" for char in secret),
        "".join(f"0x{byte:02x}" for byte in data),
        "".join(str(byte) for byte in data),
    }
    if secret.isascii():
        forms.add("".join(f"{char}\\x00" for char in secret))
    forms.add("".join(f"{byte:03o}" for byte in data))  # od -b, without the offsets
    forms.add(data[::-1].hex())  # rev | xxd -p
    return forms


def leading_forms(data: bytes) -> set[str]:
    """Encodings of the secret as the start of a stream (`printf %s "$KEY" | base85`), without
    their last group, which depends on what follows: base32hex, base85, ascii85, uuencode, and
    base64 twice over. Only at that offset: the general case is the sandbox's to keep."""
    once = base64.b64encode(data)
    uu = binascii.b2a_uu(data[:45])[1:].rstrip(b"\n")
    encoded = (
        base64.b32hexencode(data).rstrip(b"="),
        base64.b85encode(data),
        base64.a85encode(data),
        uu,
        base64.b64encode(once).rstrip(b"="),
    )
    return {form.decode("ascii")[:-5] for form in encoded if len(form) > 2 * SECRET_MIN_LENGTH}


def encoded_forms(secret: str) -> set[str]:
    """The reversed secret, its rot13, and the stable parts of its base64 and base32 encodings
    and their reverses (hex is matched apart, in any case)."""
    data = secret.encode("utf-8")
    forms = {secret[::-1], codecs.encode(secret, "rot13")}
    forms.update(wrapped_forms(data) - {data.hex()})
    forms.update(base64_forms(data[::-1]))  # `rev | base64`
    forms.update(form[::-1] for form in base64_forms(data))  # `base64 | rev`, on one row
    forms.discard("")
    forms.discard(secret)
    return forms


def wrapped_forms(data: bytes) -> set[str]:
    """The encodings that tools wrap in rows: base64, base32 and hex."""
    forms = base64_forms(data)
    for offset in range(5):
        forms.add(stable_base(data, offset, base64.b32encode, 5))
    forms.add(data.hex())
    forms.discard("")
    return forms


def base64_forms(data: bytes) -> set[str]:
    encoders: tuple[Callable[[bytes], bytes], ...] = (base64.b64encode, base64.urlsafe_b64encode)
    return {stable_base64(data, offset, encode) for encode in encoders for offset in range(3)}


def stable_base64(data: bytes, offset: int, encode: Callable[[bytes], bytes]) -> str:
    """The characters of the base64 of `data`, placed `offset` bytes (mod 3) into a stream,
    that depend on `data` alone."""
    return stable_base(data, offset, encode, 6)


def stable_base(data: bytes, offset: int, encode: Callable[[bytes], bytes], bits: int) -> str:
    """The characters of an encoding of `bits` bits a character (6 for base64, 5 for base32)
    of `data`, placed `offset` bytes into a stream, that depend on `data` alone. The first
    whole one starts at the first multiple of `bits` at or after the prefix's 8×offset bits,
    and the last one ends at or before the data's last bit; the characters on either side mix
    in their neighbours' bits."""
    encoded = encode(bytes(offset) + data).decode("ascii")
    first = -(-8 * offset // bits)
    end = 8 * (offset + len(data)) // bits
    return encoded[first:end]


def dump_forms(data: bytes) -> set[tuple[str, ...]]:
    """The units in which dumps show `data`: hex bytes (`xxd`, `od -t x1`, `hexdump -C`), hex
    words of 2 and 4 bytes in the machine's order (`od -x`, `od -t x4`, `xxd -e`) at each
    offset, octal words of 2 bytes (`od`) and octal bytes (`od -b`)."""
    forms = {tuple(f"{byte:02x}" for byte in data), tuple(f"{byte:03o}" for byte in data)}
    for size, digits, base in ((2, 4, "x"), (4, 8, "x"), (2, 6, "o")):
        for offset in range(size):
            units = [int.from_bytes(word, sys.byteorder) for word in _words(data, size, offset)]
            if len(units) * size >= MIN_DUMP_BYTES:
                forms.add(tuple(f"{unit:0{digits}{base}}" for unit in units))
    return forms


def _words(data: bytes, size: int, offset: int) -> list[bytes]:
    """The `size`-byte words, wholly of `data`, of a dump in which `data` starts `offset`
    bytes after a word's start."""
    start = -offset % size
    return [data[i : i + size] for i in range(start, len(data) - size + 1, size)]
