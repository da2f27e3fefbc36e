"""`evertalk -p MESSAGE`: one turn without a terminal app.

The turn runs as any other (the settle wait included) and its final reply goes to standard
output, a warning about the summaries (`memory: …`) or about a model that calls no tools
(`tools: …`) to standard error. With `--json`, every event goes to standard output as one JSON
line instead, as it happens. Tools whose policy is `ask` do not run (no one can be asked) unless
`--allow` grants them for this run. If the turn starts subagents, the run goes on until they
have reported and the turns their reports start have ended: a subagent is never left cut off
halfway. Compaction calls still running then are let finish, and no other starts (a line on
standard error says how many; Ctrl+C skips the wait): each is paid for, and its line is kept.

`evertalk -p --retry` runs the turn again for the last message that has no reply (its turn
failed), without logging the message a second time (`Agent.retry`); a stopped turn's line says
so when it applies. A model call tried again after a transient error says so on standard error:
`retrying (2/3) after 1.8 s: server overloaded (529)`.

Exit status: 0 when every turn ended normally; 1 with a one-line error on standard error (no
provider configured, a setting or the instructions file that cannot be used, the chat open in
another process, a failed model call, a turn stopped); 2 when `--retry` finds nothing to retry;
130 when interrupted.
"""

from __future__ import annotations

import dataclasses
import json
import re
import signal
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TextIO

import anyio
import anyio.abc

from evertalk.agent.events import (
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
from evertalk.agent.retry import NothingToRetry, has_unanswered
from evertalk.agent.session import Agent, NotConfigured
from evertalk.compactor.service import Compactor
from evertalk.config import ConfigError
from evertalk.memory_cli import report_warnings
from evertalk.providers.base import Image, ProviderError
from evertalk.store.errors import StoreError, describe
from evertalk.terminal_text import escape_controls

EXIT_OK = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_INTERRUPTED = 130

RETRY_HINT = "; evertalk -p --retry tries it again"
"""Added to a stopped turn's line when its message is left without a reply."""


def run_headless(
    home: Path,
    message: str,
    *,
    as_json: bool = False,
    grants: Sequence[str] = (),
    workdir: Path | None = None,
    images: Sequence[Image] = (),
    retry: bool = False,
) -> int:
    """Run the turn for `message` (with its images), or with `retry` the turn again for the
    last message that has no reply (`message` unused), and print its reply (or its events);
    the exit status."""
    try:
        return anyio.run(_run, home, message, as_json, tuple(grants), workdir, tuple(images), retry)
    except KeyboardInterrupt:
        print("evertalk: interrupted; what was logged stays", file=sys.stderr)
        return EXIT_INTERRUPTED


async def _run(
    home: Path,
    message: str,
    as_json: bool,
    grants: tuple[str, ...],
    workdir: Path | None,
    images: tuple[Image, ...],
    retry: bool,
) -> int:
    if not retry and not message.strip():
        return _fail("the message is empty")
    try:
        async with Agent.open(home, asker=None, granted=grants, workdir=workdir) as agent:
            report_warnings(agent.chat)
            try:
                if retry:
                    agent.retry()
                else:
                    agent.submit(message, images)
            except NothingToRetry as error:
                return _fail(str(error), EXIT_USAGE)

            def hint() -> str:
                return RETRY_HINT if has_unanswered(agent.chat) else ""

            printer: JsonPrinter | ReplyPrinter
            if as_json:
                printer = JsonPrinter(sys.stdout, sys.stderr, hint=hint)
            else:
                printer = ReplyPrinter(sys.stdout, sys.stderr, hint=hint)
            async for event in agent.events():
                printer.show(event)
                if isinstance(event, TurnEnded) and not (agent.busy or agent.subagents.running):
                    break
            await finish_summaries(agent.compactor, sys.stderr)
            return printer.status
    except (ConfigError, StoreError, NotConfigured, ProviderError) as error:
        return _fail(str(error))
    except BrokenPipeError:
        raise  # the reader of the output left: the command line ends quietly
    except OSError as error:  # the home folder itself cannot be used: one line, not a traceback
        return _fail(describe(error))


async def finish_summaries(compactor: Compactor, err: TextIO) -> None:
    """Let the compaction calls in flight land before the exit, and start no other. Each is
    paid for; cut off, its line would be lost and its node sent again by the next run. The
    wait ends when they are done, at the call deadline (SPEC §4.2), or at Ctrl+C. The line
    saying so goes to standard error in both modes: standard output stays the reply or the
    JSON events."""
    if not compactor.in_flight:
        return
    with anyio.move_on_after(compactor.settings.deadline):
        async with anyio.create_task_group() as group:
            # Ctrl+C is caught before the line invites it
            await group.start(_skip_on_interrupt, group.cancel_scope)
            count = len(compactor.in_flight)
            what = "summary" if count == 1 else "summaries"
            print(f"waiting for {count} {what} in progress (Ctrl+C skips)", file=err, flush=True)
            # no await since the count: the drain stops new calls before any could start
            await compactor.drain()
            group.cancel_scope.cancel()


async def _skip_on_interrupt(
    scope: anyio.CancelScope, *, task_status: anyio.abc.TaskStatus[None]
) -> None:
    """Ctrl+C ends the wait, not the run: the turn is over, and its exit status stands."""
    with anyio.open_signal_receiver(signal.SIGINT) as signals:
        task_status.started()
        async for _ in signals:
            scope.cancel()
            return


def for_stream(stream: TextIO, text: str) -> str:
    """`text` as it may be written to `stream`: control characters escaped for a terminal (a
    reply must not drive it), as they are for a program that reads the reply."""
    try:
        terminal = stream.isatty()
    except (AttributeError, ValueError):
        terminal = False
    return escape_controls(text) if terminal else text


def _fail(message: str, status: int = EXIT_FAILED) -> int:
    print(escape_controls(f"evertalk: {' '.join(message.split())}"), file=sys.stderr)
    return status


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


def event_type(event: AgentEvent) -> str:
    """`TextDelta` → `text_delta`."""
    return re.sub(r"(?<!^)(?=[A-Z])", "_", type(event).__name__).lower()


def event_json(event: AgentEvent) -> str:
    fields: dict[str, Any] = {"type": event_type(event), **dataclasses.asdict(event)}
    return json.dumps(fields, ensure_ascii=False, separators=(",", ":"))
