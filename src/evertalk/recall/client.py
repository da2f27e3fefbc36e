"""The benchmark as a client of the scratch home's service: import the chat (`append`, no turn
calls), wait for the compactor to build everything (`compact`, with a progress line), and ask
each question as a real turn (`send`), one after the other.

A permission question cannot come (the scratch home's tool policies say deny), and one that
came anyway would be denied: the benchmark runs nothing on the user's machine.
"""

from __future__ import annotations

import sys
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import msgspec
from msgspec.structs import replace

from evertalk.client.connection import Connection, connect, frame_name, rid_of
from evertalk.compact_cli import progress_line
from evertalk.protocol.events import Quiet, ReplyLogged, ToolStarted, TurnEnded
from evertalk.protocol.frames import ServiceFrame
from evertalk.protocol.replies import Accepted, Appended, Ask, Compact, Error, Status, Stopping
from evertalk.protocol.requests import (
    Answer,
    Append,
    GetCompact,
    GetStatus,
    OutsideMessage,
    Request,
    Send,
)
from evertalk.terminal_text import escape_controls

CLIENT: Final = "bench"
BATCH: Final = 200
BATCH_CHARS: Final = 4 * 1024 * 1024
POLL_SECONDS: Final = 0.5
QUIET_SECONDS: Final = 5.0
"""How often, at most, a progress line is printed again when standard error is no terminal."""

Say = Callable[[str], None]


class BenchError(Exception):
    """The benchmark cannot go on: one line for the user."""


@dataclass(frozen=True)
class Turn:
    answer: str
    zooms: int
    error: str | None


class Service:
    """One connection to the scratch home's service (started by it)."""

    def __init__(self, home: Path) -> None:
        self.connection: Connection = connect(home, CLIENT, start=True)
        self.rid = 0

    def close(self) -> None:
        self.connection.close()

    def request(self, request: Request) -> ServiceFrame:
        """The reply to `request`, an error as any other; the frames meanwhile are not this
        request's."""
        self.rid += 1
        self.connection.send(replace(request, rid=self.rid))
        while True:
            reply = self._next()
            if rid_of(reply) == self.rid:
                return reply

    def _next(self) -> ServiceFrame:
        frame = self.connection.receive()
        if isinstance(frame, Ask):
            self.connection.send(Answer(id=frame.id, decision="deny"))
        elif isinstance(frame, Stopping):
            raise BenchError(f"the scratch home's service stopped ({frame.reason})")
        return frame

    def import_messages(self, messages: list[dict[str, Any]]) -> int:
        """Log the messages in order; the ids the log took (a long one takes several)."""
        logged = 0
        for batch in _batches(messages):
            reply = self.request(Append(messages=batch))
            if not isinstance(reply, Appended):
                raise BenchError(f"the import failed: {_said(reply)}")
            logged += len(reply.ids)
        return logged

    def build(self, say: Say, tty: bool) -> None:
        """Wait until every node that needs a model call is built, saying how far it is."""
        shown, last = "", 0.0
        first: tuple[int, int, float] | None = None
        while True:
            reply = self.request(GetCompact())
            if isinstance(reply, Error) and reply.kind == "not_ready":
                time.sleep(POLL_SECONDS)
                continue
            if not isinstance(reply, Compact):
                raise BenchError(_said(reply))
            if reply.setup_error:
                raise BenchError(f"the compactor's model cannot be used: {reply.setup_error}")
            if reply.broken:
                raise BenchError(reply.broken)
            built, calls, cost, left = reply.built, reply.calls, reply.cost, reply.left
            first = first or (built, calls, cost)
            line = progress_line(
                built - first[0], built - first[0] + left, calls, cost, reply.error
            )
            if left == 0:
                if tty and shown:
                    print("\r\x1b[K", end="", file=sys.stderr)
                say(line)
                return
            now = time.monotonic()
            if tty:
                print("\r" + escape_controls(line), end="", file=sys.stderr, flush=True)
                shown = line
            elif now - last >= QUIET_SECONDS:
                say(line)
                last = now
            time.sleep(POLL_SECONDS)

    def status(self) -> Status:
        reply = self.request(GetStatus())
        if not isinstance(reply, Status):
            raise BenchError(_said(reply))
        return reply

    def ask(self, text: str, workdir: Path, model: str | None) -> Turn:
        """One question as a turn: its reply, the zooms it made, and why it failed if it did."""
        key = f"bench-{uuid.uuid4().hex}"
        frame = Send(text=text, key=key, cwd=str(workdir), workdir=str(workdir), model=model)
        reply = self.request(frame)
        if not isinstance(reply, Accepted):
            return Turn("", 0, _said(reply))
        replies: list[str] = []
        zooms, error, ended = 0, None, False
        while True:
            event = self._next()
            if isinstance(event, ToolStarted) and event.name == "zoom":
                zooms += 1
            elif isinstance(event, ReplyLogged):
                replies.append(event.text)
            elif isinstance(event, TurnEnded):
                ended = True
                if event.reason != "done":
                    error = event.error or event.reason
            elif isinstance(event, Quiet) and ended:
                return Turn("\n".join(replies), zooms, error)


def _said(reply: ServiceFrame) -> str:
    """What an unexpected reply says: an error's line, else its type."""
    return reply.message if isinstance(reply, Error) else f"the service replied {frame_name(reply)}"


def _batches(messages: list[dict[str, Any]]) -> list[list[OutsideMessage]]:
    batches: list[list[OutsideMessage]] = [[]]
    size = 0
    for message in messages:
        weight = len(message["text"])
        if batches[-1] and (len(batches[-1]) >= BATCH or size + weight > BATCH_CHARS):
            batches.append([])
            size = 0
        batches[-1].append(msgspec.convert(message, OutsideMessage))
        size += weight
    return [batch for batch in batches if batch]
