"""How `-p` shows a turn: its final reply (`ReplyPrinter`) or every event as JSON
(`JsonPrinter`). The events are the protocol's: the same printers serve `-p` in this process
and `-p` as a client of the service.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from typing import TextIO

from evertalk.protocol import wire
from evertalk.protocol.events import (
    AgentEvent,
    CatchingUp,
    MemoryWarning,
    ReplyLogged,
    Retrying,
    Settling,
    ToolStarted,
    ToolsUnused,
    TurnEnded,
    TurnStarted,
    catching_up_text,
)
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
    """Prints each turn's final reply: the reply texts after its last tool call. Catching up
    is said on standard error (tty or not: it can take minutes), one line about every 10 s."""

    def __init__(
        self,
        out: TextIO,
        err: TextIO,
        *,
        clock: Callable[[], float] = time.monotonic,
        hint: Callable[[], str] = _no_hint,
    ) -> None:
        self.out = out
        self.err = err
        self.clock = clock
        self.hint = hint  # what a stopped turn's line adds: how to try it again, if it applies
        self.status = EXIT_OK
        self.replies: list[str] = []
        self.caught_up_at: float | None = None  # when the running wait's last line was printed

    def show(self, event: AgentEvent) -> None:
        if isinstance(event, TurnStarted | ToolStarted):
            self.replies = []
            self.caught_up_at = None
        elif isinstance(event, CatchingUp):
            self._catching_up(event)
        elif isinstance(event, ReplyLogged):
            self.replies.append(event.text)
        elif isinstance(event, Settling) and self.err.isatty():
            print(f"waiting for {event.unbuilt} summaries…", file=self.err, flush=True)
        elif isinstance(event, MemoryWarning | ToolsUnused):  # standard output stays the reply
            print(escape_controls(event.text), file=self.err, flush=True)
        elif isinstance(event, Retrying):  # a model call tried again: said as warnings are
            print(escape_controls(event.line), file=self.err, flush=True)
        elif isinstance(event, TurnEnded):
            self.caught_up_at = None  # a turn cancelled while it waited: the next waits anew
            if self.replies:
                print(for_stream(self.out, "\n\n".join(self.replies)), file=self.out, flush=True)
            elif event.reason == "done":  # nothing on stdout must not look like a lost reply
                print("evertalk: the model gave an empty reply", file=self.err, flush=True)
            self.replies = []
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
            self.caught_up_at = now
            print(catching_up_text(event), file=self.err, flush=True)


class JsonPrinter:
    """Every event as one JSON line: `{"type": "text_delta", "text": "…"}` and so on."""

    def __init__(self, out: TextIO, err: TextIO, *, hint: Callable[[], str] = _no_hint) -> None:
        self.out = out
        self.err = err
        self.hint = hint
        self.status = EXIT_OK

    def show(self, event: AgentEvent) -> None:
        print(event_json(event), file=self.out, flush=True)
        if isinstance(event, TurnEnded) and event.reason != "done":
            self.status = EXIT_INTERRUPTED if event.reason == "cancelled" else EXIT_FAILED
            if event.reason != "cancelled":
                why = event.error or event.reason.replace("_", " ")
                stopped = escape_controls(f"evertalk: the turn stopped: {why}{self.hint()}")
                print(stopped, file=self.err, flush=True)


def event_json(event: object) -> str:
    """`{"type":"text_delta","text":"…"}`: the event as the protocol frames it."""
    return json.dumps(wire.event_frame(event), ensure_ascii=False, separators=(",", ":"))
