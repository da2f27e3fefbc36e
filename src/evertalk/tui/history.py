"""The rows of the log the app shows when it opens: the last messages, joined and paired as a
live session shows them; and, as the user scrolls up, the messages before them, a page at a
time. Each part shown starts at a message that opens a row (`opens`), so that no tool call is
parted from its result and no long message from its other pages."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any, Final

from textual.widget import Widget

from evertalk.client.remote import Message
from evertalk.grants import DENIED
from evertalk.store.records import MessageRecord
from evertalk.store.tail import last_messages
from evertalk.terminal_text import one_line
from evertalk.tui.widgets import NoteRow, ReplyView, ToolRow, UserRow, WorkRow, clip

EARLIER: Final = 8  # messages of the log shown when the app opens, at least
EARLIER_MOST: Final = 40  # messages read back to start them at the user message that opened a turn
# messages fetched each time the chat is scrolled to its top: at most 40 pages of 30,000
# characters, far under what one `records` reply holds
EARLIER_PAGE: Final = 40


def log_tail(chat_dir: Path) -> list[Message]:
    """The last EARLIER_MOST messages as the log's files hold them, read without the service:
    the app shows them while the service starts, until its `records` reply says otherwise."""
    return [_message(record) for record in last_messages(chat_dir, EARLIER_MOST)]


def _message(record: MessageRecord) -> Message:
    """A message of the log's files, as a `records` reply would give it."""
    images = tuple(record.images or ())
    return Message(
        record.i, record.kind, record.text, record.key, record.date, images, record.failed
    )


def earlier_records(records: Sequence[Message]) -> list[Message]:
    """Of the last EARLIER_MOST messages of a log, the last EARLIER, and before them the rest
    of the turn they start in: from the user message that opened it, unless that is more than
    EARLIER_MOST back (then the last EARLIER alone)."""
    last = max(0, len(records) - EARLIER)
    opened = [at for at, record in enumerate(records[: last + 1]) if record.kind == "user"]
    start = opened[-1] if opened else last
    while start > 0 and not opens(records[start]):  # back to its call, or its first page
        start -= 1
    return list(records[start:])


def opens(record: Message) -> bool:
    """Whether a row starts at this message: not a call's result (its `echo`), nor a later page
    of a long message."""
    page = page_of(record.key)
    return record.kind != "echo" and (page is None or page[1] == 0)


def opening_at(records: Sequence[Message], *, whole: bool) -> int:
    """Where rows start in `records`, a part of the log just before what is shown: at its first
    message that opens a row; at 0 when it starts the chat (`whole`) or none does. What comes
    before that place is shown with the part before it."""
    if whole:
        return 0
    return next((at for at, record in enumerate(records) if opens(record)), 0)


def earlier_rows(records: list[Message]) -> list[Widget]:
    """Rows as a live session shows them, drawn as earlier ones (see `rows_of`)."""
    return [row for row, _ in rows_of(records)]


def rows_of(records: list[Message], *, earlier: bool = True) -> list[tuple[Widget, list[Message]]]:
    """Rows as a live session shows them, each with the messages it shows: a `tool` message
    and the `echo` after it make one tool row; an echo of no call (`turn stopped: …`) is a
    note; the pages of a long message one row. `earlier`: dimmed, as the log's past."""
    rows: list[tuple[Widget, list[Message]]] = []
    call: ToolRow | None = None  # the last call, waiting for its echo
    for record, pages in _joined(records):
        if record.kind == "echo" and call is not None:
            output = record.text.removeprefix(f"{call.tool}: ")
            call.finish(output, failed(record, call.tool, output))
            rows[-1][1].extend(pages)
            call = None
            continue
        if call is not None:  # the process ended before the call's result was logged
            call.finish("no result was logged", True)
            call = None
        if record.kind == "tool":
            call = ToolRow(*tool_call(record.text))
            rows.append((call, list(pages)))
        else:
            rows.append((earlier_row(record, earlier=earlier), list(pages)))
    if call is not None:
        call.finish("no result was logged", True)
    return rows


# what tells a failed call in a log written before echoes were marked `failed`: the start of
# a refusal or a cancel, a shell command's last line
REFUSED = (DENIED, "cancelled by the user")
SHELL_FAILED = re.compile(
    r"\[(exit status [1-9][0-9]*|killed by signal [0-9]+|timed out after [0-9]+ s)\]\Z"
)


def failed(record: Message, tool: str, output: str) -> bool:
    """Whether an `echo` tells of a failed call: its mark, or in an older log its words."""
    if record.failed or output.startswith(REFUSED):
        return True
    return tool == "shell" and SHELL_FAILED.search(output) is not None


def earlier_row(record: Message, *, earlier: bool = True) -> Widget:
    classes = "earlier" if earlier else None
    if record.kind == "user":
        return UserRow(record.text, classes=classes)
    if record.kind == "ever":
        return ReplyView(record.text, classes=classes)
    if record.kind == "work":
        return WorkRow(record.text)
    prefix = "" if record.kind == "echo" else f"{record.kind}: "
    return NoteRow(prefix + clip(one_line(record.text), 160))


def tool_call(text: str) -> tuple[str, dict[str, Any]]:
    """A `tool` message's name and input (`shell {"command":"ls"}`)."""
    name, _, raw = text.partition(" ")
    try:
        value = json.loads(raw)
    except ValueError:
        value = None
    return name, value if isinstance(value, dict) else {"input": raw}


def join_pages(records: list[Message]) -> list[Message]:
    """The records with the pages of a long message (keys `K.0`, `K.1`, …) joined into one."""
    return [record for record, _ in _joined(records)]


def _joined(records: list[Message]) -> list[tuple[Message, list[Message]]]:
    """Each record with the pages of a long message joined into one, and the pages it holds."""
    joined: list[tuple[Message, list[Message]]] = []
    for record in records:
        page, before = page_of(record.key), (joined[-1][0] if joined else None)
        if (
            page is not None
            and before is not None
            and before.kind == record.kind
            and page_of(before.key) == (page[0], page[1] - 1)
        ):
            # the joined record keeps the later key, so that the next page finds it
            merged = replace(before, text=before.text + record.text, key=record.key)
            joined[-1] = (merged, [*joined[-1][1], record])
            continue
        joined.append((record, [record]))
    return joined


def page_of(key: str | None) -> tuple[str, int] | None:
    """(K, n) for the key `K.n` of page n of a long message; None for a whole one."""
    stem, dot, number = (key or "").rpartition(".")
    return (stem, int(number)) if dot and number.isdigit() else None
