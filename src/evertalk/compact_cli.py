"""`evertalk memory compact`: watch the service build every node that needs a model call, with
a progress line.

The service does the work (this command starts it when none runs), so that a summary paid for
is never cut off by a client leaving. About twice a second the command asks it where its
compactor is (the `compact` request); while it asks, a node that failed is tried again on a
timer rather than at the next message, and once nothing is left, a batch of merges that waited
for the summaries goes on at once, so that the command ends with the view at or under its
ceiling.

A chat that is behind (an import, a long time offline, a lost tree) is said to be catching up
first, with the summaries to go before a turn's view is whole and about how long they take (the
service's figure, which the app and `memory status` show too); the progress line counts every
node this command waits for, a larger figure in other words (`built 12/40`). On a terminal the
progress line is redrawn in place, with the time left once a rate is measured; a warning (a
node's first failure) gets a line of its own above it. The last line, terminal or not, is the
progress at the end. Its figures are this command's: what the service built, called and spent
since the command began (since the service started, when the command started it).

Ctrl+C ends the watching only: the summaries go on in the service. Nothing here imports the
agent, the compactor or a model SDK: the service has them loaded already.
"""

from __future__ import annotations

import select
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from evertalk.client.connection import Connection, ServiceError, ServiceGone, connect, running
from evertalk.protocol.events import CatchingUp, MemoryWarning, about, catching_up_text
from evertalk.protocol.frames import ServiceFrame
from evertalk.protocol.replies import Ask, Compact, Error, Stopping
from evertalk.protocol.requests import Answer, GetCompact
from evertalk.terminal_text import escape_controls

CLIENT: Final = "compact"
POLL_SECONDS: Final = 0.5
PAUSED: Final = "memory: summaries are paused"
"""How the service's warning of a setup error (a wrong key or model) starts: this command
ends on that error, said in its own one line, so the warning would only say it twice."""
WATCH_HINT: Final = "evertalk memory status shows how far it is"
KEPT: Final = "the summaries built so far are kept (evertalk memory compact goes on from there)"


class _Ended(Exception):
    """The command ends on this one line (exit status 1)."""


def run_compact(home: Path) -> int:
    chat_dir = home / "chat"
    if not (chat_dir / "main").is_dir():  # a service would start an empty chat there
        return _fail(f"no chat in {chat_dir} (set --home or EVERTALK_HOME)")
    from evertalk.config import ConfigError, load_config

    watch = _Watch()
    try:
        # read here too, as -p does: a setting that cannot be used is this command's one line
        load_config(home)
        watch.progress.started = not running(home)
        with connect(home, CLIENT, start=True) as connection:
            return watch.follow(connection)
    except (ServiceError, ConfigError, _Ended) as error:
        if isinstance(error, ServiceGone):  # the service ended without a word: it died
            error = _Ended(f"the service went away; {KEPT}")
        return _fail(str(error))
    except KeyboardInterrupt:
        watch.leave()
        return 130


@dataclass
class _Progress:
    """This command's share of the service's figures, and the line that shows them."""

    started: bool = False  # the command started the service: all its work is the command's
    base: tuple[int, int, float] | None = None  # built, calls and cost when the command began
    total: int = 0
    done: int = 0
    left: int | None = None
    line: str = ""

    def update(self, reply: Compact) -> None:
        built, calls, cost, left = reply.built, reply.calls, reply.cost, reply.left
        if self.base is None:
            self.base = (0, 0, 0.0) if self.started else (built, calls, cost)
            self.total = left + built - self.base[0]
        # messages logged meanwhile (another client's turn) add work to the total, and a
        # finished node is never taken back from the count
        self.done = max(self.done, self.total - left)
        self.total = max(self.total, self.done + left)
        self.left = left
        rate = reply.rate
        eta = f"{about(left / rate)} left" if rate and left else None
        self.line = progress_line(
            self.done,
            self.total,
            calls - self.base[1],
            max(0.0, cost - self.base[2]),
            reply.error,
            eta,
        )


class _Watch:
    def __init__(self) -> None:
        self.progress = _Progress()
        self.tty = sys.stderr.isatty()
        self.drawn = False  # a progress line stands unfinished on the terminal

    def follow(self, connection: Connection) -> int:
        first = True
        while True:
            connection.send(GetCompact())
            reply = self._reply(connection)
            if reply is None:  # the service is reopening on new settings: ask again shortly
                self._listen(connection, POLL_SECONDS)
                continue
            if reply.setup_error:
                raise _Ended(f"the compactor's model cannot be used: {reply.setup_error}")
            if reply.broken:
                raise _Ended(reply.broken)
            self.progress.update(reply)
            behind = reply.catching_up
            if first and behind is not None:
                said = CatchingUp(behind.to_go, behind.eta_seconds)
                self._say(catching_up_text(said))
            first = False
            if self.progress.left == 0:
                merged_from = reply.merged_from
                if merged_from is not None:
                    after = reply.view_bytes
                    self._say(f"the view merged down from {merged_from:,} to {after:,} bytes")
                self._say(self.progress.line)
                return 0
            if self.tty:
                line = escape_controls(self.progress.line)
                print("\r" + line, end="", file=sys.stderr, flush=True)
                self.drawn = True
            self._listen(connection, POLL_SECONDS)

    def leave(self) -> None:
        """Ctrl+C: the command goes, the service builds on."""
        left = self.progress.left
        # every node left, not the catching-up figure: other words for another count
        to_build = f" ({left:,} left to build)" if left else ""
        print(
            ("\n" if self.drawn else "")
            + f"stopped watching: the service goes on building the summaries{to_build}; "
            + WATCH_HINT,
            file=sys.stderr,
        )

    def _reply(self, connection: Connection) -> Compact | None:
        """The service's answer to `compact`, the frames before it handled; None when it has no
        chat open for a moment."""
        while True:
            frame = connection.receive()
            if isinstance(frame, Compact):
                return frame
            if isinstance(frame, Error):
                if frame.kind == "not_ready":
                    return None
                raise _Ended(frame.message)
            self._frame(connection, frame)

    def _listen(self, connection: Connection, seconds: float) -> None:
        """Handle what the service sends for `seconds`: a warning shows as it comes."""
        deadline = time.monotonic() + seconds
        while (wait := deadline - time.monotonic()) > 0:
            if not connection.pending:
                readable, _, _ = select.select([connection.sock], [], [], wait)
                if not readable:
                    return
            self._frame(connection, connection.receive())

    def _frame(self, connection: Connection, frame: ServiceFrame) -> None:
        if isinstance(frame, MemoryWarning):
            if not frame.text.startswith(PAUSED):
                self._say(frame.text)
        elif isinstance(frame, Stopping):
            raise _Ended(f"the service was stopped ({frame.reason}); {KEPT}")
        elif isinstance(frame, Ask):
            # a question the service had nobody else to put to: nobody here can answer it, and
            # left open it would hold that turn for as long as this command watches
            connection.send(Answer(id=frame.id, decision="deny"))

    def _say(self, line: str) -> None:
        """A line of its own, over the progress line, which the next tick draws again below."""
        prefix = "\r\x1b[K" if self.drawn else ""
        print(prefix + escape_controls(line), file=sys.stderr, flush=True)
        self.drawn = False


def progress_line(
    done: int, total: int, calls: int, cost: float, error: str | None, eta: str | None = None
) -> str:
    """`[#####---] built 12/40 · calls 13 · $0.0123 · about 2 min left · last error: …`."""
    width = 24
    filled = width * done // total if total else width
    bar = "#" * filled + "-" * (width - filled)
    tail = f" · {eta}" if eta else ""
    tail += f" · last error: {error}" if error else ""
    return f"[{bar}] built {done:,}/{total:,} · calls {calls:,} · ${cost:.4f}{tail}"


def _fail(message: str) -> int:
    print(escape_controls(f"evertalk: {' '.join(message.split())}"), file=sys.stderr)
    return 1
