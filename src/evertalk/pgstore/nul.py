"""Texts with NUL characters, which PostgreSQL's text type refuses and the file store keeps (a
shell's output decoded with replacement keeps them): such a text is stored escaped behind a
mark, and so is any text that begins with the mark, so that every text reads back as written.
"""

from __future__ import annotations

MARK = "\x01nul\x01"
"""Begins a stored text that was escaped: backslashes doubled, each NUL written `\\0`."""


def stored(text: str) -> str:
    """`text` as the database can hold it."""
    if "\x00" not in text and not text.startswith(MARK):
        return text
    return MARK + text.replace("\\", "\\\\").replace("\x00", "\\0")


def stored_or_none(text: str | None) -> str | None:
    return None if text is None else stored(text)


def read(value: str) -> str:
    """A stored text as it was written."""
    if not value.startswith(MARK):
        return value
    body, out, n = value[len(MARK) :], [], 0
    while n < len(body):
        char = body[n]
        if char == "\\" and n + 1 < len(body):
            out.append("\x00" if body[n + 1] == "0" else body[n + 1])
            n += 2
        else:
            out.append(char)
            n += 1
    return "".join(out)


def read_or_none(value: str | None) -> str | None:
    return None if value is None else read(value)
