"""Keeping known secrets out of what is logged and shown: `redact(text, secrets)`.

Each secret long enough to be a real key is replaced by `[redacted]` as it is, and also in the
forms a command can easily turn it into: reversed, hex (either case), and base64 in
the standard and the URL-safe alphabet. Base64 is matched at each of the three byte offsets a
secret can have inside a longer encoded stream (`base64 <<< "prefix$KEY"` encodes the key
differently from `base64 <<< "$KEY"`): the characters that depend on the secret's bytes alone
are the same at any given offset, and those are what is replaced. Any form may be broken by
line breaks, as `base64` and `xxd -p` wrap their output.

This is defence in depth: a command can always encode a key some other way (the shell's sandbox
is what keeps it from reading the key at all). It runs on every log write and every tool result,
so the patterns are built once per set of secrets, and a text none of them can match (the usual
case) is let through after a few substring searches, without running the regular expression.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import lru_cache
from typing import Final

REDACTED: Final = "[redacted]"
SECRET_MIN_LENGTH: Final = 8
"""Shorter values are not redacted, as they are or encoded: they would blank out parts of
ordinary words (a local server's placeholder key `local` made `localhost` read `[redacted]host`
in every connection error, and the log keeps what it garbles forever), and are no real key."""

_BREAK: Final = r"(?:\r?\n)?"
"""What may stand between two characters of a form: one line break, as a wrapping tool puts."""


@dataclass(frozen=True)
class Redactor:
    """The compiled patterns of one set of secrets."""

    exact: tuple[str, ...]  # forms matched case-sensitively (without line breaks)
    folded: tuple[str, ...]  # lower-cased forms matched in any case (hex)
    pattern: re.Pattern[str] | None

    def apply(self, text: str) -> str:
        if self.pattern is None or not self._may_hold_one(text):
            return text
        return self.pattern.sub(REDACTED, text)

    def _may_hold_one(self, text: str) -> bool:
        """Whether a form occurs once line breaks are ignored: plain substring searches, much
        faster than the expression, which then finds exactly where."""
        flat = text.replace("\r", "").replace("\n", "")
        if any(form in flat for form in self.exact):
            return True
        if self.folded:
            lower = flat.lower()
            return any(form in lower for form in self.folded)
        return False


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
    for secret in secrets:
        if len(secret) < SECRET_MIN_LENGTH:
            continue
        exact.add(secret)
        exact.update(encoded_forms(secret))
        folded.add(secret.encode("utf-8").hex())
    # the longest first: at one position the alternation takes the first branch that matches,
    # so a key that contains another is replaced whole
    branches = [(form, False) for form in exact] + [(form, True) for form in folded]
    branches.sort(key=lambda branch: len(branch[0]), reverse=True)
    if not branches:
        return Redactor((), (), None)
    pattern = re.compile("|".join(_branch(form, fold) for form, fold in branches))
    return Redactor(tuple(exact), tuple(folded), pattern)


def _branch(form: str, fold: bool) -> str:
    body = _BREAK.join(re.escape(char) for char in form)
    return f"(?i:{body})" if fold else body


def encoded_forms(secret: str) -> set[str]:
    """The reversed secret and the stable parts of its base64 encodings (hex is matched apart,
    in any case)."""
    data = secret.encode("utf-8")
    forms = {secret[::-1]}
    encoders: tuple[Callable[[bytes], bytes], ...] = (
        base64.b64encode,
        base64.urlsafe_b64encode,
    )
    for encode in encoders:
        for offset in range(3):
            forms.add(stable_base64(data, offset, encode))
    forms.discard("")
    return forms


def stable_base64(data: bytes, offset: int, encode: Callable[[bytes], bytes]) -> str:
    """The characters of the base64 of `data`, placed `offset` bytes (mod 3) into a stream,
    that depend on `data` alone. Each character carries 6 bits: the first whole one starts at
    the first multiple of 6 at or after the prefix's 8×offset bits, and the last one ends at or
    before the data's last bit; the characters on either side mix in their neighbours' bits."""
    encoded = encode(bytes(offset) + data).decode("ascii")
    first = -(-8 * offset // 6)
    end = 8 * (offset + len(data)) // 6
    return encoded[first:end]
