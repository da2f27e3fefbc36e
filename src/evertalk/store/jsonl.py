"""JSON Lines files: scanning with the torn-line rules of SPEC §1.4. Appends and reads of single
lines are line_files.py's (its names are here too, where they were first)."""

from __future__ import annotations

import io
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evertalk.store.line_files import (
    TERM_HASH,
    TERM_NEWLINE,
    TERM_NONE,
    Appender,
    Reader,
    end_torn_line,
    parse_object,
    torn_terminator,
)

__all__ = [
    "CHUNK",
    "TERM_HASH",
    "TERM_NEWLINE",
    "TERM_NONE",
    "TORN",
    "Appender",
    "Batch",
    "Line",
    "Reader",
    "Scan",
    "end_torn_line",
    "parse_object",
    "torn_terminator",
]

CHUNK = 1 << 18
"""Bytes read at a time: a batch of lines and the records decoded from it stay in the CPU's
second-level cache, where the rebuild's loop finds them again (a megabyte at a time cost about a
sixth more)."""

TORN = "the last line is torn (no newline at its end)"


@dataclass(frozen=True, slots=True)
class Line:
    offset: int
    """Byte offset of the line's first byte."""
    length: int
    """Bytes of the line, its newline included."""
    lineno: int
    record: dict[str, Any] | None
    """The JSON object on the line; None when the line is not one (see `reason`)."""
    reason: str | None = None
    """Why `record` is None: `not valid JSON`, `not a JSON object`."""


@dataclass(frozen=True, slots=True)
class Batch:
    """Consecutive complete lines of a file, as one read found them."""

    offset: int
    """Byte offset of the first line."""
    lineno: int
    """Number of the first line."""
    lines: list[bytes]
    """The lines, each with its newline (JSON takes it for whitespace)."""


class Scan:
    """The complete lines of a file from `start`, read about CHUNK bytes at a time.

    After iteration, `end` is the offset just after the last complete line, `lines` the number of
    the last complete line, and `term` what the next append must write first (TERM_NONE when the
    file ends with a newline). Lines that are not JSON objects are yielded with a `reason`, and
    warned about only when `warnings` is given; so is a torn last line.

    `batches()` gives the same lines as raw bytes, a chunk at a time, for readers that decode them
    their own way (the index rebuild): a `Line` per line costs more than reading the file.
    """

    def __init__(
        self,
        path: Path,
        start: int = 0,
        first_lineno: int = 1,
        warnings: list[str] | None = None,
    ) -> None:
        self.path = path
        self.start = start
        self.first_lineno = first_lineno
        self.warnings = warnings
        self.end = start
        self.lines = first_lineno - 1
        self.term = TERM_NONE
        self.torn_lineno: int | None = None
        """The number of a torn last line, if the file ends in one."""

    def _warn(self, lineno: int, what: str) -> None:
        if self.warnings is not None:
            self.warnings.append(f"{self.path} line {lineno}: {what}; skipped")

    def _line(self, offset: int, raw: bytes, lineno: int) -> Line:
        parsed = parse_object(raw)
        if type(parsed) is dict:
            return Line(offset, len(raw), lineno, parsed)
        reason = parsed if isinstance(parsed, str) else "not a JSON object"
        self._warn(lineno, reason)
        return Line(offset, len(raw), lineno, None, reason)

    def __iter__(self) -> Iterator[Line]:
        for batch in self.batches():
            offset, lineno = batch.offset, batch.lineno
            for raw in batch.lines:
                yield self._line(offset, raw, lineno)
                offset += len(raw)
                lineno += 1

    def batches(self) -> Iterator[Batch]:
        """The complete lines, a chunk at a time; `end`, `lines` and `term` as for iteration."""
        lineno = self.first_lineno
        partial = b""  # a line the file ended in when it was read, which may have grown since
        # readlines finds newlines with memchr: twice as fast as bytes.split, which tests each
        # byte in a loop of its own; a line is never cut between two batches.
        with open(self.path, "rb", buffering=max(CHUNK, io.DEFAULT_BUFFER_SIZE)) as file:
            file.seek(self.start)
            offset = self.start
            while lines := file.readlines(CHUNK):
                if partial:
                    lines[0] = partial + lines[0]
                partial = b"" if lines[-1].endswith(b"\n") else lines.pop()
                if not lines:
                    continue
                yield Batch(offset, lineno, lines)
                offset = file.tell() - len(partial)
                lineno += len(lines)
                self.end, self.lines = offset, lineno - 1
        if partial:
            self.torn_lineno = lineno
            self._warn(lineno, TORN)
            self.term = torn_terminator(partial)
