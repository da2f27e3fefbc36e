"""What the readers share: times, the text of tool messages, images, JSON Lines, and building
one conversation's messages with stable keys."""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO

from evertalk.image_files import MAX_IMAGE_BYTES, sniff
from evertalk.importers.json_stream import cut_chars
from evertalk.importers.model import (
    Conversation,
    ImageData,
    Imported,
    Kind,
    Problem,
    Reading,
    SourceKind,
)
from evertalk.memory.text import clip_output

MEDIA_TYPES = frozenset({"image/png", "image/jpeg", "image/gif", "image/webp"})
"""What the providers take; an image of another type would make every request that shows it
fail, so it is left out."""

MAX_DOCUMENT_BYTES = 1024**3
"""The largest JSON document an import reads (a ChatGPT `conversations.json`, read one
conversation at a time): real exports are a few hundred megabytes, and a zip that claims more
is refused before it is opened rather than allowed to fill the memory."""
MAX_LINE_BYTES = 256 * 1024**2
"""The largest line of JSON Lines an import reads: a line is parsed whole, so a bigger one would
cost several times its size in memory."""
MAX_MESSAGE_CHARS = 8_000_000
"""The longest message an import takes, in characters: some two million tokens, more than any
model's window, which the log would split into 267 pages, each a summary to pay for. A longer
one is no chat message but a dump (a log, a database pasted whole): it is left out, named, and
the rest is imported; an export's JSON never holds more than this much of it at once."""

NO_OUTPUT = "(no output)"  # what the app's own tools give for an empty result

EMPTY = "empty messages"
THOUGHTS = "thoughts (never imported)"
DUPLICATES = "records seen before (the same key)"
OVERSIZED_IMAGES = "images over 5 MB"
UNKNOWN_FORMAT = (
    "not a Claude Code transcript, a Codex rollout, a ChatGPT export or evertalk's JSON Lines"
)

_DATA_URL = re.compile(r"data:(image/[\w.+-]+);base64,(.*)", re.DOTALL)


@dataclass
class Context:
    """One call of `read_paths`: where problems and counts go, and its options."""

    reading: Reading
    headings: bool = True
    document_limit: int = MAX_DOCUMENT_BYTES
    line_limit: int = MAX_LINE_BYTES
    message_limit: int = MAX_MESSAGE_CHARS

    def problem(
        self, file: str, why: str, line: int | None = None, record: str | None = None
    ) -> None:
        self.reading.problems.append(Problem(file, why, line, record))

    def skip(self, reason: str, count: int = 1) -> None:
        if count:
            self.reading.skipped[reason] += count


def parse_time(value: object) -> datetime | None:
    """An aware datetime from an ISO 8601 string or a Unix time in seconds; UTC when the value
    names no zone; None for anything else."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        try:
            return datetime.fromtimestamp(value, UTC)
        except (OverflowError, OSError, ValueError):
            return None
    if not isinstance(value, str):
        return None
    text = value.strip()
    if text.endswith(("Z", "z")):  # 3.11 reads a Z, but not a lower-case one
        text = text[:-1] + "+00:00"
    try:
        when = datetime.fromisoformat(text)
    except ValueError:
        return None
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def compact_json(value: object) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"))


def tool_text(name: str, tool_input: object) -> str:
    """A `tool` message as the app logs its own calls: the name, a space, the compact JSON input
    (SPEC §1.2). Written here rather than imported, to keep this package free of the agent."""
    arguments = tool_input if isinstance(tool_input, dict) else {"input": tool_input}
    return f"{name} {compact_json(arguments)}"


def echo_text(name: str, output: str, images: int = 0) -> str:
    """An `echo` message as the app logs its own results: `name: output`, clipped (SPEC §1.5).
    An empty output says so, or that the result is `images` images."""
    if not output.strip():
        output = NO_OUTPUT if not images else "[image]" if images == 1 else f"[{images} images]"
    return clip_output(f"{name}: {output}")


def arguments(raw: str) -> object:
    """A tool call's input sent as a JSON string: the object it holds, else the string whole."""
    try:
        value = json.loads(raw)
    except ValueError:
        return {"input": raw}
    return value if isinstance(value, dict) else {"input": raw}


def image_from_base64(media_type: object, data: object, ctx: Context) -> ImageData | None:
    """An image given as base64, if the chat can keep it; what cannot is counted."""
    if not isinstance(media_type, str) or not isinstance(data, str):
        ctx.skip("images not readable")
        return None
    if media_type not in MEDIA_TYPES:
        ctx.skip("images of an unsupported type")
        return None
    data = "".join(data.split())
    if len(data) * 3 // 4 > MAX_IMAGE_BYTES + 2:
        ctx.skip(OVERSIZED_IMAGES)
        return None
    try:
        base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError):
        ctx.skip("images not readable")
        return None
    return media_type, data


def image_from_bytes(data: bytes, ctx: Context) -> ImageData | None:
    """An image file's bytes, typed from their signature (exports name some `.dat`)."""
    if len(data) > MAX_IMAGE_BYTES:
        ctx.skip(OVERSIZED_IMAGES)
        return None
    media_type = sniff(data)
    if media_type is None:
        ctx.skip("images of an unsupported type")
        return None
    return media_type, base64.b64encode(data).decode("ascii")


def image_from_url(url: object, ctx: Context) -> ImageData | None:
    """An image given as a `data:` URL; one that points elsewhere was never in the file."""
    match = _DATA_URL.fullmatch(url) if isinstance(url, str) else None
    if match is None:
        ctx.skip("images not in the file (links)")
        return None
    return image_from_base64(match.group(1), match.group(2), ctx)


def jsonl_records(path: Path, display: str, ctx: Context) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, object) for each line of a JSON Lines file; a line that is not a JSON
    object, is nested past what a parser's stack takes, or is over `ctx.line_limit` bytes is a
    problem that names it, and the lines after it are still read."""
    with path.open("rb") as file:
        for number, raw in enumerate(_lines(file, ctx.line_limit), 1):
            if raw is None:
                ctx.problem(
                    display,
                    f"a line over the {byte_size(ctx.line_limit)} an import reads; skipped",
                    number,
                )
                continue
            if not raw.strip():
                continue
            try:
                value = json.loads(raw.rstrip(b"\r\n"))
            except UnicodeDecodeError:
                ctx.problem(display, "not valid UTF-8", number)
                continue
            except ValueError as error:
                ctx.problem(display, f"not valid JSON: {json_error(error)}", number)
                continue
            except RecursionError:
                ctx.problem(display, "nested too deeply to read; skipped", number)
                continue
            if not isinstance(value, dict):
                ctx.problem(display, "not a JSON object", number)
                continue
            yield number, value


def _lines(file: BinaryIO, limit: int) -> Iterator[bytes | None]:
    """Each line of `file`, or None for one longer than `limit` bytes, which is passed over
    without being held."""
    while line := file.readline(limit + 1):
        if len(line) <= limit or line.endswith(b"\n"):
            yield line
            continue
        while (more := file.readline(_SKIP_CHUNK)) and not more.endswith(b"\n"):
            pass
        yield None


_SKIP_CHUNK = 1024 * 1024


def byte_size(count: int) -> str:
    """A size in words: `976.6 KiB`, `3.1 GiB`."""
    size = float(count)
    for unit in ("bytes", "KiB", "MiB"):
        if size < 1024:
            return f"{count:,} bytes" if unit == "bytes" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GiB"


def json_error(error: ValueError) -> str:
    """What a parse error says, in words for a problem line."""
    if isinstance(error, json.JSONDecodeError):
        return f"{error.msg[:1].lower()}{error.msg[1:]} (column {error.colno})"
    return str(error)


def string(value: object) -> str | None:
    return value if isinstance(value, str) else None


@dataclass
class Draft:
    """One conversation's messages while a reader builds them."""

    source: SourceKind
    file: str
    id: str
    ctx: Context
    title: str | None = None
    heading: str | None = None
    messages: list[Imported] = field(default_factory=list)

    def record(self, key: str, source: str, time: datetime) -> Emitter:
        """Where the messages one source record yields go: the first gets `key`, the n-th
        after it `key#n`."""
        return Emitter(self, key, source, time)

    def finish(self) -> Conversation | None:
        """The conversation, with its heading note first; None when it has no message."""
        if not self.messages:
            return None
        messages = self.messages
        if self.ctx.headings and self.heading and not cut_chars(self.heading):
            first = messages[0]
            start = Imported(
                "note",
                self.heading,
                first.time,
                f"{self.source}:{self.id}:start",
                f"{self.source} {self.file}",
            )
            messages = [start, *messages]
        return Conversation(self.source, self.file, self.id, self.title, tuple(messages))


@dataclass
class Emitter:
    draft: Draft
    key: str
    source: str
    time: datetime
    count: int = 0

    def add(self, kind: Kind, text: str, images: tuple[ImageData, ...] = ()) -> None:
        """One message; an empty one is counted, not kept. An image with no words gets a
        placeholder text, since a summary needs something to read."""
        if not text.strip():
            if not images:
                self.draft.ctx.skip(EMPTY)
                return
            text = "[image]" if len(images) == 1 else f"[{len(images)} images]"
        key = self.key if self.count == 0 else f"{self.key}#{self.count}"
        self.count += 1  # a message left out keeps its number: the next keys stay the same
        if not self._within_limit(text, key):
            return
        self.draft.messages.append(Imported(kind, text, self.time, key, self.source, images))

    def _within_limit(self, text: str, key: str) -> bool:
        """Whether the text is short enough to import; a longer one is a problem naming it."""
        ctx = self.draft.ctx
        cut = cut_chars(text)  # a string the reader did not hold whole (`json_stream`)
        if not cut and len(text) <= ctx.message_limit:
            return True
        size = max(cut, len(text))
        ctx.problem(
            self.draft.file,
            f"a message of {size:,} characters, over the {ctx.message_limit:,} an import "
            "takes; left out",
            record=key,
        )
        return False

    def add_keyed(self, suffix: str, kind: Kind, text: str) -> None:
        """A message the reader adds of its own (a note about the source), with a key of its
        own, so that the record's other keys do not depend on it."""
        key = f"{self.key}#{suffix}"
        self.draft.messages.append(Imported(kind, text, self.time, key, self.source))
