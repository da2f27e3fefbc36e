"""`evertalk -p MESSAGE` as a client of the service: the turn runs in the service, and its reply
(or its events, with `--json`) and its exit status come out here.

The message goes with an idempotency key and the working directory; the printer shows the events
from the service's acceptance on, and the run ends at the first `quiet` after a turn ended (no
turn, no held message, no subagent left). A permission request is answered here: `once` for a
tool that `--allow` grants, `deny` otherwise, as `-p` does on its own. Summaries go on in the
service after the exit: nothing is abandoned. If the service goes away during the turn, it is
started again and the message sent again under the same key: logged once, answered by a retry.
Ctrl+C cancels the turn in the service, waits a few seconds for it to end, and exits 130; a
message that waits behind another client's turn stays, and is answered after it.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path

from evertalk.client.asks import request_line
from evertalk.client.connection import Connection, ServiceError, ServiceGone, connect
from evertalk.client.printers import (
    EXIT_FAILED,
    EXIT_INTERRUPTED,
    EXIT_USAGE,
    JsonPrinter,
    ReplyPrinter,
)
from evertalk.grants import covers
from evertalk.protocol.events import (
    Delivered,
    Event,
    MemoryWarning,
    MessageSent,
    Quiet,
    ReplyLogged,
    TurnEnded,
    TurnStarted,
)
from evertalk.protocol.frames import ServiceFrame
from evertalk.protocol.replies import Accepted, Ask, Error, Stopping
from evertalk.protocol.requests import Answer, Cancel, Image, Retry, Send
from evertalk.terminal_text import escape_controls, fail

CLIENT = "-p"
RETRY_HINT = "; evertalk -p --retry tries it again"
"""Added to a stopped turn's line when its message is left without a reply."""
LOGGED_STAYS = "what it logged stays in the chat (ask again, or ask Ever to go on)"
CUT_SHORT = f"the service stopped during the turn; {LOGGED_STAYS}"
INTERRUPTED_STAYS = "what was logged stays"
CANCEL_SECONDS = 5.0
"""How long Ctrl+C waits for the service to end the turn it cancels."""


def run_via_service(
    home: Path,
    message: str,
    *,
    as_json: bool = False,
    grants: Sequence[str] = (),
    workdir: Path | None = None,
    images: Sequence[tuple[str, str]] = (),
    retry: bool = False,
    start: bool = True,
    model: str | None = None,
    over_budget: bool = False,
    raw: bool = False,
    now: bool = False,
) -> int:
    """One turn through the service; the exit status. `images`: (media type, base64) each;
    `model`: the model of this turn alone (config.toml keeps its own); `over_budget`: the turn
    runs though the day's spending is past the daily budget (else the service refuses it);
    `raw`: the reply's control characters reach a terminal as they are (else they are shown
    escaped); `now`: the turn does not wait for a chat that is behind to catch up. The
    settings are the service's to read, and the budget its to check."""
    if not retry and not message.strip():
        return fail("the message is empty")
    request: Send | Retry = Retry(within_budget=not over_budget)
    if not retry:
        request = Send(
            text=message,
            key=f"p-{os.urandom(16).hex()}",
            cwd=str(Path.cwd().resolve()),
            workdir=str(workdir.resolve()) if workdir is not None else None,
            images=[Image(kind, data) for kind, data in images],
            model=model,
            within_budget=not over_budget,
            now=now,
        )
    try:
        problem = _settings_open_to_others(home)
        if problem is not None:
            return fail(problem)
        return _Run(home, request, as_json, frozenset(grants), start, raw).go()
    except ServiceError as error:
        return fail(str(error))


def _settings_open_to_others(home: Path) -> str | None:
    """A config.toml that other users may read is loaded here, so that making it private is
    said on this terminal (and a setting it cannot use is this command's one-line error); a
    private one is left to the service. What is wrong with it, or None."""
    try:
        mode = os.stat(home / "config.toml").st_mode
    except OSError:
        return None
    if not mode & 0o077:
        return None
    from evertalk.config import ConfigError, load_config

    try:
        load_config(home)
    except ConfigError as error:
        return str(error)
    return None


def _say(line: str) -> None:
    """What `-p` waits for, on standard error: standard output stays the reply."""
    print(f"evertalk: {line}", file=sys.stderr, flush=True)


def answered(ask: Ask, allowed: bool) -> str:
    """What `-p` says of a permission question it answered (standard output stays the reply)."""
    if allowed:
        how = f"allowed once (--allow {ask.tool})"
    elif ask.outside:
        how = "denied (outside the working directory, only the app can allow it)"
    else:
        how = f"denied (-p --allow {ask.tool} allows it)"
    return f"evertalk: {request_line(ask)} — {how}"


class _Run:
    def __init__(
        self,
        home: Path,
        request: Send | Retry,
        as_json: bool,
        grants: frozenset[str],
        start: bool,
        raw: bool = False,
    ) -> None:
        self.home = home
        self.request = request
        self.resent = False  # sent again after the service went away
        self.waiting = False  # the message waits while a turn that is not its own runs
        # the message as the log keeps it, which `delivered` shows: its `sent` event says
        self.kept = request.text if isinstance(request, Send) else None
        self.name = f"{CLIENT} {os.getpid()}"  # as the service names this client
        self.grants = grants
        self.start = start
        self.replied = False  # a reply of this turn was logged: nothing to retry
        self.retry_works = False  # the service found the message left without a reply
        self.accepted = False  # the service took the request on this connection
        self.ended = False  # a turn ended on this connection: the next `quiet` ends the run
        self.printer: JsonPrinter | ReplyPrinter = (
            JsonPrinter(sys.stdout, sys.stderr, hint=self._hint)
            if as_json
            else ReplyPrinter(sys.stdout, sys.stderr, hint=self._hint, raw=raw)
        )

    def _hint(self) -> str:
        """What a stopped turn's line adds: how to try it again, when its message is left
        without a reply (not when it never got into the log: a retry would find nothing)."""
        return RETRY_HINT if self.retry_works and not self.replied else ""

    def go(self) -> int:
        connection: Connection | None = None
        try:
            connection = connect(self.home, CLIENT, start=self.start, say=_say)
            while True:
                try:
                    return self._turn(connection)
                except ServiceGone:
                    connection.close()
                    print("evertalk: the service stopped; starting it again", file=sys.stderr)
                    connection = connect(self.home, CLIENT, start=True, say=_say)
        except KeyboardInterrupt:
            return self._interrupted(connection)
        finally:
            if connection is not None:
                connection.close()

    def _interrupted(self, connection: Connection | None) -> int:
        """Ctrl+C: this message's turn is cancelled in the service, and its end awaited a few
        seconds (a second Ctrl+C leaves at once); one line says how it went."""
        if connection is None:  # while the service started: nothing was sent
            print("evertalk: interrupted; nothing was sent", file=sys.stderr, flush=True)
            return EXIT_INTERRUPTED
        try:
            said = self._cancel(connection, time.monotonic() + CANCEL_SECONDS)
        except (ServiceError, KeyboardInterrupt):  # gone, too slow, or Ctrl+C again
            said = "interrupted"
        print(f"evertalk: {said}; {INTERRUPTED_STAYS}", file=sys.stderr, flush=True)
        return EXIT_INTERRUPTED

    def _cancel(self, connection: Connection, deadline: float) -> str:
        """Cancel this message's turn and wait for its end; what the line says of it."""
        while not self.accepted:  # cancelled before the service took it, its turn would run
            if isinstance(self._frame(connection, deadline), Error | Stopping):
                return "interrupted"
        if self.waiting:  # the turn that runs is another client's: it is not ours to stop
            return "interrupted; the message stays, and is answered after the turn now running"
        connection.send(Cancel())
        while True:
            frame = self._frame(connection, deadline)
            if isinstance(frame, Stopping):
                return "interrupted; the service is stopping"
            if isinstance(frame, TurnStarted):  # it began as the cancel went: once more
                connection.send(Cancel())
            if isinstance(frame, Event) and not isinstance(frame, Quiet):
                self.printer.show(frame)
            if isinstance(frame, TurnEnded):
                return "interrupted; the turn was cancelled"

    @staticmethod
    def _frame(connection: Connection, deadline: float) -> ServiceFrame:
        """The next frame before `deadline`; ServiceGone when none comes by then."""
        connection.sock.settimeout(max(0.01, deadline - time.monotonic()))
        return connection.receive()

    def _turn(self, connection: Connection) -> int:
        self.accepted, self.ended = False, False
        connection.send(self.request)
        while True:
            frame = connection.receive()
            if isinstance(frame, Accepted):
                self._accepted(connection, frame)
            elif isinstance(frame, Error):
                if frame.kind == "nothing_to_retry" and self.resent:
                    return fail(CUT_SHORT)
                status = EXIT_USAGE if frame.kind == "nothing_to_retry" else EXIT_FAILED
                return fail(frame.message, status)
            elif isinstance(frame, Stopping):
                why = frame.reason
                return fail(f"the service was stopped ({why}) during the turn; {LOGGED_STAYS}")
            elif isinstance(frame, Ask):
                # outside the working directory a file tool needs a yes that --allow is not
                allowed = covers(self.grants, frame.tool) and not frame.outside
                print(escape_controls(answered(frame, allowed)), file=sys.stderr, flush=True)
                connection.send(Answer(id=frame.id, decision="once" if allowed else "deny"))
            elif isinstance(frame, Event) and self._event(frame):
                return self.printer.status

    def _accepted(self, connection: Connection, accepted: Accepted) -> None:
        self.accepted = True
        self.waiting = accepted.held is True  # a turn runs: the next one is ours
        if accepted.duplicate and isinstance(self.request, Send):
            # logged before the service went away: a turn for it, unless one answered
            self.request, self.resent = Retry(), True
            connection.send(self.request)
            self.accepted = False

    def _event(self, event: Event) -> bool:
        """Show an event (of this request's turn, or a warning, which always shows); whether
        the run is over (quiet after the turn ended)."""
        if isinstance(event, MessageSent) and self._own(event):
            self.kept = event.text
        if not self.accepted and not isinstance(event, MemoryWarning):
            return False  # before the service took the request: another client's
        if isinstance(event, Quiet) and self.ended:
            return True
        if self.waiting and not self._reached(event):
            return False  # another client's turn, running when this message came
        if isinstance(event, TurnEnded):
            self.ended = True
            self.retry_works = event.retry
        if isinstance(event, TurnStarted):
            self.replied = False
        elif isinstance(event, ReplyLogged):
            self.replied = True
        if not isinstance(event, Quiet):
            self.printer.show(event)
        return False

    def _own(self, sent: MessageSent) -> bool:
        """Whether the `sent` event is this message's: by its key (the service's text may not
        be the one typed)."""
        return isinstance(self.request, Send) and sent.key == self.request.key

    def _reached(self, event: object) -> bool:
        """Whether the message, held while another turn ran, has reached the model: that
        turn took it (`delivered`), or the next turn starts with it. Warnings always show."""
        if isinstance(event, MessageSent):
            return False  # its own message it knows; another's is not its turn
        taken = isinstance(event, Delivered) and event.text == self.kept
        if taken or isinstance(event, TurnStarted):
            self.waiting = False
        return not self.waiting or isinstance(event, MemoryWarning)
