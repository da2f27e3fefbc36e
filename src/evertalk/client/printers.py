"""How `-p` shows a turn: its reply as it streams (`ReplyPrinter`) or every event as JSON
(`JsonPrinter`). The events are the protocol's: the same printers serve `-p` in this process
and `-p` as a client of the service.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import TextIO

from evertalk.protocol.events import (
    CatchingUp,
    Event,
    MemoryWarning,
    ReplyLogged,
    Retrying,
    Settling,
    TextDelta,
    ToolStarted,
    ToolsUnused,
    TurnEnded,
    TurnStarted,
    catching_up_text,
)
from evertalk.protocol.frames import to_dict
from evertalk.terminal_text import escape_controls

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130


def for_stream(stream: TextIO, text: str) -> str:
    """`text` as it may be written to `stream`: control characters escaped for a terminal (a
    reply must not drive it), as they are for a program that reads the reply."""
    try:
        terminal = stream.isatty()
    except (AttributeError, ValueError):
        terminal = False
    return escape_controls(text) if terminal else text


def _no_hint() -> str:
    return ""


CATCH_UP_EVERY = 10.0
"""Seconds between two lines of progress while a turn waits for the chat to catch up: a wait of
minutes must not look hung, and a line a second would bury everything else on standard error."""


class ReplyPrinter:
    """Prints the reply as it streams, each piece flushed as it comes (as `llm` does): the texts
    of a turn in order, a blank line between two that a tool call parts. A text that did not
    stream is printed whole when it is logged; one logged longer than it streamed (a reply cut
    off gets a last line saying so) adds what was not shown. A reply that broke off and starts
    over (`Retrying.replaces`) is said on standard error, and printed again after a blank line.
    Catching up is said on standard error (tty or not: it can take minutes), one line about
    every 10 s. With `raw` the reply's control characters are written as they are, to a
    terminal too (`-p --raw`)."""

    def __init__(
        self,
        out: TextIO,
        err: TextIO,
        *,
        clock: Callable[[], float] = time.monotonic,
        hint: Callable[[], str] = _no_hint,
        raw: bool = False,
    ) -> None:
        self.out = out
        self.err = err
        self.raw = raw
        self.clock = clock
        self.hint = hint  # what a stopped turn's line adds: how to try it again, if it applies
        self.status = EXIT_OK
        self.streamed = ""  # the text streamed since the last logged reply
        self.printed = ""  # the end of what this turn printed (its last two characters)
        self.held = ""  # white space at the end of the text printed, not written yet
        self.parted = False  # a tool call came since the last text printed
        self.caught_up_at: float | None = None  # when the running wait's last line was printed

    def show(self, event: Event) -> None:
        if isinstance(event, TurnStarted):
            self._turn_over()
            self.caught_up_at = None
        elif isinstance(event, TextDelta):
            self._print(event.text)
            self.streamed += event.text
        elif isinstance(event, ReplyLogged):
            self._logged(event.text)
        elif isinstance(event, ToolStarted):
            self.parted, self.held = bool(self.printed), ""
            self.caught_up_at = None
        elif isinstance(event, CatchingUp):
            self._catching_up(event)
        elif isinstance(event, Settling) and self.err.isatty():
            print(f"waiting for {event.unbuilt} summaries…", file=self.err, flush=True)
        elif isinstance(event, MemoryWarning | ToolsUnused):  # standard output stays the reply
            print(escape_controls(event.text), file=self.err, flush=True)
        elif isinstance(event, Retrying):  # a model call tried again: said as warnings are
            print(escape_controls(event.line), file=self.err, flush=True)
            if event.replaces:  # what was printed stays: the reply starts over below it
                self.streamed, self.held = "", ""
                self.parted = self.parted or bool(self.printed)
        elif isinstance(event, TurnEnded):
            self._ended(event)

    def _print(self, text: str) -> None:
        """Write a piece of text; white space at either end of a text is left out, as the log
        keeps its texts stripped (what ends a piece is held until more text follows it)."""
        if not self.printed or self.parted:
            text = text.lstrip()
        body = (self.held + text).rstrip()
        self.held = (self.held + text)[len(body) :]
        if not body:
            return
        if self.parted:  # a blank line between the texts a tool call parts
            self.out.write("\n" * (2 - len(self.printed) + len(self.printed.rstrip("\n"))))
            self.parted = False
        self.out.write(body if self.raw else for_stream(self.out, body))
        self.out.flush()
        self.printed = (self.printed + body)[-2:]

    def _logged(self, text: str) -> None:
        """A reply text logged: what of it did not stream is printed now."""
        shown = self.streamed.strip()
        at = self.streamed.find(text)
        if at >= 0:
            self.streamed = self.streamed[at + len(text) :]
            return
        self.streamed = ""
        if shown and text.startswith(shown):
            self._print(text[len(shown) :])
            return
        self.parted = self.parted or bool(self.printed)
        self._print(text)

    def _turn_over(self) -> None:
        """The turn's output ends with a line break; the next starts afresh."""
        if self.printed and not self.printed.endswith("\n"):
            self.out.write("\n")
            self.out.flush()
        self.streamed, self.printed, self.held, self.parted = "", "", "", False

    def _ended(self, event: TurnEnded) -> None:
        self.caught_up_at = None  # a turn cancelled while it waited: the next waits anew
        if not self.printed and event.reason == "done":
            # nothing on stdout must not look like a lost reply
            print("evertalk: the model gave an empty reply", file=self.err, flush=True)
        self._turn_over()
        if event.reason == "cancelled":
            self.status = EXIT_INTERRUPTED
        elif event.reason != "done":
            self.status = EXIT_FAILED
            why = event.error or event.reason.replace("_", " ")
            stopped = escape_controls(f"evertalk: the turn stopped: {why}{self.hint()}")
            print(stopped, file=self.err, flush=True)

    def _catching_up(self, event: CatchingUp) -> None:
        now = self.clock()
        if self.caught_up_at is None or now - self.caught_up_at >= CATCH_UP_EVERY:
            # the first line of a wait says how not to wait; the next ones only how far
            hint = NOW_HINT if self.caught_up_at is None else ""
            self.caught_up_at = now
            print(catching_up_text(event) + hint, file=self.err, flush=True)


NOW_HINT = " (evertalk -p --now starts a turn without waiting)"


class JsonPrinter:
    """Every event as one JSON line: `{"type": "text_delta", "text": "…"}` and so on."""

    def __init__(self, out: TextIO, err: TextIO, *, hint: Callable[[], str] = _no_hint) -> None:
        self.out = out
        self.err = err
        self.hint = hint
        self.status = EXIT_OK

    def show(self, event: Event) -> None:
        print(event_json(event), file=self.out, flush=True)
        if isinstance(event, TurnEnded) and event.reason != "done":
            self.status = EXIT_INTERRUPTED if event.reason == "cancelled" else EXIT_FAILED
            if event.reason != "cancelled":
                why = event.error or event.reason.replace("_", " ")
                stopped = escape_controls(f"evertalk: the turn stopped: {why}{self.hint()}")
                print(stopped, file=self.err, flush=True)


def event_json(event: Event) -> str:
    """`{"type":"text_delta","text":"…"}`: the event as the protocol frames it."""
    return json.dumps(to_dict(event), ensure_ascii=False, separators=(",", ":"))
