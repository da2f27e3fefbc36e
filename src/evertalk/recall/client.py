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

from evertalk.client.connection import Connection, connect
from evertalk.compact_cli import progress_line
from evertalk.protocol import wire
from evertalk.protocol.events import Quiet, ReplyLogged, ToolStarted, TurnEnded
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

    def request(self, frame: dict[str, Any]) -> dict[str, Any]:
        """The reply to `frame`; the events meanwhile are not this request's."""
        self.rid += 1
        self.connection.send(frame | {"rid": self.rid})
        while True:
            reply = self._next()
            if reply.get("rid") == self.rid:
                return reply

    def _next(self) -> dict[str, Any]:
        frame = self.connection.receive()
        kind = frame.get("type")
        if kind == "ask":
            self.connection.send({"type": "answer", "id": frame.get("id"), "decision": "deny"})
        elif kind == "stopping":
            raise BenchError(f"the scratch home's service stopped ({frame.get('reason')})")
        return frame

    def import_messages(self, messages: list[dict[str, Any]]) -> int:
        """Log the messages in order; the ids the log took (a long one takes several)."""
        logged = 0
        for batch in _batches(messages):
            reply = self.request({"type": "append", "messages": batch})
            if reply.get("type") != "appended":
                raise BenchError(f"the import failed: {reply.get('message')}")
            logged += len(reply["ids"])
        return logged

    def build(self, say: Say, tty: bool) -> None:
        """Wait until every node that needs a model call is built, saying how far it is."""
        shown, last = "", 0.0
        first: tuple[int, int, float] | None = None
        while True:
            reply = self.request({"type": "compact"})
            if reply.get("type") == "error":
                if reply.get("kind") != "not_ready":
                    raise BenchError(str(reply.get("message")))
                time.sleep(POLL_SECONDS)
                continue
            if reply.get("setup_error"):
                raise BenchError(f"the compactor's model cannot be used: {reply['setup_error']}")
            if reply.get("broken"):
                raise BenchError(str(reply["broken"]))
            built, calls, cost, left = (
                int(reply["built"]),
                int(reply["calls"]),
                float(reply["cost"]),
                int(reply["left"]),
            )
            first = first or (built, calls, cost)
            line = progress_line(
                built - first[0], built - first[0] + left, calls, cost, reply.get("error")
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

    def status(self) -> dict[str, Any]:
        return self.request({"type": "status"})

    def ask(self, text: str, workdir: Path, model: str | None) -> Turn:
        """One question as a turn: its reply, the zooms it made, and why it failed if it did."""
        frame: dict[str, Any] = {
            "type": "send",
            "text": text,
            "key": f"bench-{uuid.uuid4().hex}",
            "cwd": str(workdir),
            "workdir": str(workdir),
        }
        if model is not None:
            frame["model"] = model
        reply = self.request(frame)
        if reply.get("type") != "accepted":
            return Turn("", 0, str(reply.get("message")))
        replies: list[str] = []
        zooms, error, ended = 0, None, False
        while True:
            event = wire.event_of(self._next())
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


def _batches(messages: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    batches: list[list[dict[str, Any]]] = [[]]
    size = 0
    for message in messages:
        weight = len(message["text"])
        if batches[-1] and (len(batches[-1]) >= BATCH or size + weight > BATCH_CHARS):
            batches.append([])
            size = 0
        batches[-1].append(message)
        size += weight
    return [batch for batch in batches if batch]
