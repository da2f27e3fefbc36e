"""`evertalk import PATH...`: other agents' history (`importers/`) appended to the chat, through
the service, after a preview and a yes.

The preview says what was found (sources, conversations, messages by kind, the dates), what was
left out and what could not be read, and what the summaries will cost: the nodes that need a
call (a message long enough, a merge) times the calls a node took in this home's ledger, at its
cost per call (without a history: what real imports took, at the compactor model's prices), as a
range; messages already in the chat cost nothing. It also says what turns send meanwhile: at
most the view's ceiling. The progress line shows what the summaries have cost since the import
began. The messages then go oldest first (each conversation whole, in the order they began), in
batches, each message under its source key: a run stopped by Ctrl+C or a kill resumes where it
stopped, and importing the same files again adds nothing. A message longer than a request can
carry goes as several, whole pages each (`importers.pieces`). A batch is logged at once, even
while a turn runs (that turn does not see it). The summaries go on in the service afterwards;
the chat stays usable meanwhile (it catches up).

Blocking and standard library only, like `-p`: nothing here imports the agent or an SDK.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from evertalk.client.connection import (
    BadFrame,
    Connection,
    RequestFailed,
    ServiceError,
    ServiceGone,
    connect,
)
from evertalk.importers import Imported, Reading, read_paths
from evertalk.importers.pieces import sendable
from evertalk.ledger import LedgerTally, ledger_path
from evertalk.memory.budget import Budget
from evertalk.memory.text import LINE_LIMIT, leaf_input, utf8_len
from evertalk.protocol.events import about
from evertalk.protocol.replies import Appended, Status
from evertalk.protocol.requests import Append, GetStatus, Image, OutsideMessage
from evertalk.protocol.wire import ProtocolError
from evertalk.summary_cost import summary_estimate
from evertalk.terminal_text import confirmed, escape_controls, fail

BATCH: Final = 200
"""Messages per `append` request …"""
BATCH_BYTES: Final = 4 * 1024 * 1024
"""… and at most this much text and image data in one."""
PROBLEMS_SHOWN: Final = 10
BAR_MOST: Final = 24
"""Columns of the progress bar, at most; it takes what the words leave of the terminal's."""
BAR_LEAST: Final = 5  # narrower than this, no bar: the words alone

LINE_BYTES: Final = LINE_LIMIT  # a node whose input fits a line needs no call (SPEC §2.3)
SUMMARY_BYTES: Final = 400  # a built line, as models write them (300 to 500 bytes)
DEFAULT_CALL_SECONDS: Final = 10.0
CALLS_AT_ONCE: Final = 8
VIEW_BYTES_PER_TOKEN: Final = 3  # counted low, as the turn's own estimate starts (SPEC §3.8)


@dataclass(frozen=True)
class Estimate:
    calls: int
    """The likeliest count of compaction calls; `low` to `high` is the range around it."""
    low: int
    high: int
    cost: float | None  # USD at `calls`; None when the model's price is unknown
    low_cost: float | None
    high_cost: float | None

    @property
    def seconds(self) -> float:
        return self.calls * DEFAULT_CALL_SECONDS / CALLS_AT_ONCE

    def said(self) -> str:
        """`about 8,400–12,000 compaction calls, $3.13–$4.51`."""
        calls = _span(f"{_rounded(self.low):,}", f"{_rounded(self.high):,}")
        if self.low_cost is None or self.high_cost is None:
            return f"about {calls} compaction calls, price unknown"
        cost = _span(_dollars(self.low_cost), _dollars(self.high_cost))
        return f"about {calls} compaction calls, {cost}"


def _rounded(count: int) -> int:
    """Two significant figures: a range is no place for more."""
    places = len(str(count)) - 2
    return count if places <= 0 else round(count, -places)


def _dollars(cost: float) -> str:
    return f"${cost:,.2f}"


def _span(low: str, high: str) -> str:
    return low if low == high else f"{low}–{high}"


def run_import(home: Path, paths: Sequence[str], *, yes: bool) -> int:
    reading = read_paths([Path(path).expanduser() for path in paths])
    # each conversation whole, in the order they began: two that overlapped in time (tabs open
    # side by side) would otherwise interleave, and the summaries of neighbours would mix them
    messages, too_big = sendable(reading.by_conversation())
    reading.problems += too_big
    for line in preview(reading, messages, estimate(home, messages)):
        print(escape_controls(line))
    if not messages:
        return fail("nothing to import" + (": no file could be read" if reading.problems else ""))
    if not yes and not _confirmed():
        return fail("nothing imported") if sys.stdin.isatty() else fail(NEED_YES, 2)
    try:
        return _append_all(home, messages)
    except KeyboardInterrupt:
        print(
            "\nstopped; what was imported stays, and the same command goes on from there",
            file=sys.stderr,
        )
        return 130


NEED_YES = "not a terminal: nothing imported (add --yes to import without the question)"


def preview(reading: Reading, messages: list[Imported], guess: Estimate) -> list[str]:
    """The lines shown before the question."""
    by_source: dict[str, int] = {}
    for conversation in reading.conversations:
        by_source[conversation.source] = by_source.get(conversation.source, 0) + 1
    sources = ", ".join(f"{name} ({count:,})" for name, count in sorted(by_source.items()))
    kinds = reading.kinds()
    lines = [
        f"files        {len(reading.files):,}",
        f"sources      {sources or 'none'}",
        f"conversations {len(reading.conversations):,}",
        f"messages     {len(messages):,}"
        + (": " + ", ".join(f"{kind} {n:,}" for kind, n in sorted(kinds.items())) if kinds else ""),
    ]
    span = reading.span()
    if span is not None:
        lines.append(f"dates        {span[0]:%Y-%m-%d} to {span[1]:%Y-%m-%d}")
    if reading.skipped:
        left = ", ".join(f"{why} {n:,}" for why, n in reading.skipped.most_common())
        lines.append(f"left out     {left}")
    if messages:
        lines.append(
            f"summaries    {guess.said()}, {about(guess.seconds)} at the default pace; the chat "
            "stays usable meanwhile"
        )
        if guess.calls:
            ceiling = Budget().ceiling
            lines.append(
                f"turns        meanwhile send at most {ceiling // 1000} KB of view each (about "
                f"{ceiling // VIEW_BYTES_PER_TOKEN // 1000}K tokens), the oldest messages as "
                "coarse lines until their summaries come"
            )
        lines.append(
            "already imported messages are skipped; all of them come after the chat's own "
            "messages in the log (`date` tells when each was said)"
        )
    if reading.problems:
        lines.append(f"could not read {len(reading.problems):,}:")
        lines += [f"  {problem}" for problem in reading.problems[:PROBLEMS_SHOWN]]
        if len(reading.problems) > PROBLEMS_SHOWN:
            lines.append(f"  … and {len(reading.problems) - PROBLEMS_SHOWN:,} more")
    return lines


def estimate(home: Path, messages: list[Imported]) -> Estimate:
    """About how many compaction calls the messages need, what they cost, how long they take:
    the nodes that need a call, times the calls a node took in this home's ledger (follow-ups
    and retries included) at the ledger's cost per call, where there is such a history; else
    at the default figures (`summary_cost`). Messages the chat holds already cost nothing."""
    from evertalk.import_history import in_chat

    held = in_chat(home, [m.key for m in messages])
    sizes = [utf8_len(leaf_input(m.kind, m.text)) for m in messages if m.key not in held]
    found = summary_estimate(home, calls_for(sizes))
    return Estimate(found.calls, found.low, found.high, found.cost, found.low_cost, found.high_cost)


def calls_for(sizes: list[int]) -> int:
    """The compaction calls a tree over leaves of these input sizes takes, by the rule of free
    nodes (SPEC §2.3): a node whose input fits one line is its input, with no call; any other
    is a call whose line is taken to be SUMMARY_BYTES long. Level by level, pairing neighbours
    as the tree does; an odd one out waits for the chat's next messages, and so do its parents."""
    calls = 0
    level = []
    for size in sizes:
        free = size <= LINE_BYTES
        calls += not free
        level.append(size if free else SUMMARY_BYTES)
    while len(level) > 1:
        merged = []
        for left, right in zip(level[::2], level[1::2], strict=False):
            joined = left + 1 + right
            free = joined <= LINE_BYTES
            calls += not free
            merged.append(joined if free else SUMMARY_BYTES)
        level = merged
    return calls


def _confirmed() -> bool:
    return sys.stdin.isatty() and confirmed("import them?")


def _append_all(home: Path, messages: list[Imported]) -> int:
    try:
        connection = connect(home, "import", start=True)
    except ServiceError as error:
        return fail(str(error))
    sent = skipped = 0  # messages, not the pages the log splits a long one into
    began = time.monotonic()
    spent = LedgerTally.from_now(ledger_path(home), role="compaction")  # the import's summaries
    with connection:
        try:
            for batch in _batches(messages):
                skipped += _append(connection, batch)
                sent += len(batch)
                _progress(connection, sent, len(messages), began, spent.read())
        # no frame of ours should pass the limit, and the service should take every one; if
        # not (or it sends what is no frame), this run stops with its line
        except (ProtocolError, RequestFailed, BadFrame) as error:
            print(file=sys.stderr)
            return fail(f"stopped after {sent:,} of {len(messages):,} messages: {error}")
        except ServiceGone:
            print(file=sys.stderr)
            return fail(
                f"the service went away after {sent:,} of {len(messages):,} messages; "
                "run the same command again to go on"
            )
    added = sent - skipped
    print(file=sys.stderr)
    print(
        f"imported {added:,} messages ({skipped:,} were already in the chat); the summaries go "
        "on in the service: `evertalk memory status` shows them, `evertalk memory compact` "
        "waits for them"
    )
    return 0


def _batches(messages: list[Imported]) -> list[list[OutsideMessage]]:
    batches: list[list[OutsideMessage]] = [[]]
    size = 0
    for message in messages:
        frame = outside_message(message)
        weight = len(message.text) + sum(len(data) for _, data in message.images)
        if batches[-1] and (len(batches[-1]) >= BATCH or size + weight > BATCH_BYTES):
            batches.append([])
            size = 0
        batches[-1].append(frame)
        size += weight
    return [batch for batch in batches if batch]


def outside_message(message: Imported) -> OutsideMessage:
    """A message as an `append` carries it (`evertalk import`, `capture`)."""
    return OutsideMessage(
        kind=message.kind,
        text=message.text,
        date=message.time.isoformat(),
        key=message.key,
        images=[Image(kind, data) for kind, data in message.images],
    )


def _append(connection: Connection, batch: list[OutsideMessage]) -> int:
    """Send one batch: the service logs it at once, a turn running or not. How many of its
    messages the chat had already."""
    reply = connection.request(Append(messages=batch), Appended)
    return reply.skipped


def _progress(connection: Connection, done: int, total: int, began: float, spent: float) -> None:
    """The progress line; `spent`: what the summaries cost since the import began."""
    status = connection.request(GetStatus(), Status)
    pace = done / max(time.monotonic() - began, 1e-6)
    left = f"{about((total - done) / pace)} left" if pace and done < total else "done"
    queued = status.compactor_queued + status.compactor_running
    words = f"summaries to build {queued:,} · ${spent:.4f} spent on summaries · {left}"
    if sys.stderr.isatty():
        line = progress_line(done, total, words, _columns())
        print("\r" + line, end="", file=sys.stderr, flush=True)
    else:
        print(progress_line(done, total, words), file=sys.stderr, flush=True)


def progress_line(done: int, total: int, words: str, columns: int | None = None) -> str:
    """`[bar] done/total messages · words`. On a terminal `columns` wide, within `columns - 1`
    (a full row would wrap, and each redraw would land on a row of its own): the bar takes
    what the words leave, up to BAR_MOST, and the words are clipped. Never more done than the
    total."""
    done = max(0, min(done, total))
    line = f"{done:,}/{total:,} messages · {words}"
    room = BAR_MOST if columns is None else columns - 1 - len(line) - 3  # "[", "] "
    width = min(BAR_MOST, room)
    if width >= BAR_LEAST:
        filled = width * done // total if total else width
        line = f"[{'#' * filled}{'-' * (width - filled)}] {line}"
    return line if columns is None else line[: max(columns - 1, 1)]


def _columns() -> int:
    try:
        return os.get_terminal_size(sys.stderr.fileno()).columns
    except OSError:
        return 80
