"""`evertalk mcp`: the chat's memory as an MCP server over stdio, for other agents (Claude Code,
Codex, Cursor, any MCP client): the view, `zoom`, `date`, the status, and notes into the chat.

The server is a client like any other of the home's service, which owns the chat: it works while the
terminal app is open, and starts the service when none runs. Each tool call runs in a worker
thread of the SDK and opens a connection of its own, so that a service that stopped or was
restarted between two calls costs nothing, and one that dies during a call is reached again
once (a note carries an idempotency key, so that it is never logged twice).

The SDK takes seconds to import, so it is imported only when the server is built, and importing
this module stays cheap. That is why the tool functions are defined inside `build_server`, after
those imports, and why this module does not postpone its annotations: the SDK reads the tools'
parameters and their JSON schemas from the functions' annotations, evaluated where they stand.
"""

import argparse
import itertools
import json
import re
import select
import sys
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TypeVar

import msgspec
from msgspec import UNSET
from msgspec.structs import replace

from evertalk.client.connection import (
    BadFrame,
    Connection,
    RequestFailed,
    ServiceError,
    ServiceGone,
    connect,
    reply_as,
    rid_of,
)
from evertalk.protocol.frames import ServiceFrame
from evertalk.protocol.replies import Appended, Date, Error, Status, View, Zoom
from evertalk.protocol.requests import (
    Append,
    GetDate,
    GetStatus,
    GetView,
    GetZoom,
    OutsideMessage,
    Request,
)
from evertalk.protocol.status_text import status_lines

if TYPE_CHECKING:
    from mcp.server import MCPServer

CLIENT: Final = "mcp"
"""How the service names this client's connections (`mcp <pid>`), in its log and its windows."""

READY_WAIT: Final = 45.0
"""How long a request is offered again while the service answers `not_ready` (it is applying
new settings) before the call fails: under the 60 s that Codex gives a tool call by default."""

RETRY_EVERY: Final = 0.5
"""How often a request that met `not_ready` is offered again."""

REPLY_WAIT: Final = 30.0
"""How long a request waits for its reply before the call fails (a service that hangs)."""

GONE_TRIES: Final = 2
"""Connections a call may lose to a service that went away before it gives up."""

PART_BYTES: Final = 32_000
"""The largest part of the view one `memory_view` returns, in UTF-8 bytes of its lines: about
8,000 tokens, under the 10,000 at which Claude Code warns of a large tool result (a whole view
is 64–128 KB)."""

NOTE_MOST: Final = 20_000
"""Characters of one note: a note is a statement, not a document."""


R = TypeVar("R", bound=msgspec.Struct)


class Refused(Exception):
    """What the service answered instead (or why it could not be asked): one line, the tool
    call's error."""


@dataclass
class Memory:
    """The home's service, as the tools use it: one request per connection."""

    home: Path

    def __post_init__(self) -> None:
        self._rids = itertools.count(1)
        # set once the client has gone: a request offered again while the service is not
        # ready gives up at once, rather than keep the process alive (the SDK's worker threads
        # are joined at exit)
        self.closed = threading.Event()

    def ask(self, request: Request, kind: type[R]) -> R:
        """The service's reply to `request`, of the type `kind`. Refused when it answers with
        an error (or what is no frame), or cannot be reached or started. A `not_ready` reply is
        retried for at most READY_WAIT seconds."""
        ready_by = time.monotonic() + READY_WAIT
        lost = 0
        while True:
            try:
                connection = connect(self.home, CLIENT, start=True)
            except ServiceError as error:
                raise Refused(f"evertalk service: {error}") from None
            try:
                return self._exchange(connection, request, kind, ready_by)
            except ServiceGone:
                lost += 1
                if lost >= GONE_TRIES:
                    raise Refused(
                        "the evertalk service went away during the call: try again"
                    ) from None
            except BadFrame as error:
                raise Refused(str(error)) from None
            finally:
                connection.close()

    def _exchange(
        self, connection: Connection, request: Request, kind: type[R], ready_by: float
    ) -> R:
        while True:
            rid = next(self._rids)
            connection.send(replace(request, rid=rid))
            try:
                return reply_as(_reply(connection, rid), request, kind)
            except RequestFailed as error:
                # `not_ready`: the service is applying new settings, a matter of a moment
                if error.kind != "not_ready" or time.monotonic() + RETRY_EVERY > ready_by:
                    said = _line(str(error))
                    raise Refused(
                        said or f"the service refused the request ({error.kind})"
                    ) from None
            if self.closed.wait(RETRY_EVERY):
                raise Refused("the MCP client has gone")


def _reply(connection: Connection, rid: int) -> ServiceFrame:
    """The reply that carries `rid`; the events that come first are skipped."""
    deadline = time.monotonic() + REPLY_WAIT
    while True:
        frame = _receive_by(connection, deadline)
        if frame is None:
            raise Refused(f"the evertalk service did not answer within {REPLY_WAIT:g} s")
        if rid_of(frame) == rid:
            return frame
        if isinstance(frame, Error) and frame.rid is UNSET:
            # an error that answers no request ends the connection (a frame it could not read)
            raise Refused(_line(frame.message) or "the service refused the request")


def _receive_by(connection: Connection, deadline: float) -> ServiceFrame | None:
    """The next frame, or None when none comes before `deadline`. ServiceGone when the
    connection ends."""
    if not connection.pending:
        left = deadline - time.monotonic()
        if left <= 0:
            return None
        readable, _, _ = select.select([connection.sock], [], [], left)
        if not readable:
            return None
    return connection.receive()


def _line(value: object) -> str:
    return " ".join(str(value or "").split())


# What the tools tell a model that has never heard of evertalk. The service's own texts (the
# view, a zoom, a date) are passed on unchanged, as Ever sees them.

INSTRUCTIONS: Final = """\
evertalk is the user's own AI agent, Ever, and its memory: one chat between the user and Ever \
that never ends, kept word for word, and summarized as a tree of one-line summaries that covers \
all of it. These tools let you read that memory (what the user and Ever said, decided and did, \
possibly months ago) and add a note to it. When the user refers to earlier work, a decision or \
a preference that you do not know about, look it up: memory_view for the overview, then \
memory_zoom into the lines that look relevant until you have the messages themselves."""

VIEW_DESCRIPTION: Final = """\
Read the user's evertalk memory: everything the user and their agent, Ever, have said and done in \
their one chat that never ends, as one-line summaries, oldest first. It is the very text Ever \
reads at the start of each of its turns.

The text sits between <chat> and </chat>. Each line is written `id+n|text` and sums up n \
consecutive messages, from message number id on (numbered from 0 in the order written). The \
summaries are built from the bottom: every message gets a line of its own, then each two \
neighbouring lines are joined into one that covers both, and so on upward. So the newest lines \
mostly cover one message each (n = 1), while older ones cover 2, 4, 8 or more and keep less \
detail. Each item in a summary is tagged with its message's kind: user (the user wrote it), ever \
(Ever replied), tool and echo (a tool Ever called, and what came back), work (a report from one \
of Ever's helpers), note (added from outside, for example by memory_note). A line \
`(not summarized yet: zoom it)` is a message whose summary is still to be written, and \
`[not yet summarized: messages a–b]` an old stretch in the same state; memory_zoom opens both \
like any other line.

Use the view to find where something was discussed, then memory_zoom into that line: summaries \
lose details, and if a subject came up several times, trust its most recent mention. The view \
holds no dates (memory_date has them).

A view larger than about 32 KB is split into parts. Without `part` you get the newest one, headed \
by a line in square brackets that says which part it is; pass `part` for older ones."""

PART_DESCRIPTION: Final = (
    "Which part of a large view to return, 1 being the oldest; by default the newest. Parts are "
    "cut anew at each call, as the chat grows."
)

ZOOM_DESCRIPTION: Final = """\
Open a line of the evertalk memory (see memory_view) to see what it sums up: for the line \
`id+n|...`, pass its id and its n.

When n > 1, you get the two half lines it was built from, `id+h|...` and `(id+h)+h|...` where \
h = n/2; keep zooming into whichever half looks relevant, down to n = 1. When n = 1, you get \
message id itself, complete and word for word, as `id+1|kind: text`.

The line need not be in the view right now. Any n works that is a power of two (1, 2, 4, ...), \
with an id divisible by n and id + n no greater than the message count (memory_status): so you \
can read message 1234 directly (id=1234, n=1), or zoom out to a coarser line. Check a summary by \
zooming before you rely on it: the exact words, figures, paths and decisions live in the \
messages."""

ID_DESCRIPTION: Final = "The first message the line covers: the number before the '+'."
N_DESCRIPTION: Final = (
    "How many messages the line covers: the number after the '+', a power of two; 1 for one "
    "message."
)

DATE_DESCRIPTION: Final = """\
When message id of the evertalk memory was written, as one line in this computer's local time: \
date, weekday, time and offset from UTC, for example `2031-05-17 Saturday 09:41:07 +01:00`. The \
memory itself carries no dates, so this is how to tell how old a fact or a decision is. A line \
`id+n|...` spans messages id to id+n-1: ask about both ends to date the whole stretch."""

DATE_ID_DESCRIPTION: Final = "A message's number, from 0 to the number of messages minus one."

STATUS_DESCRIPTION: Final = """\
The state of the user's evertalk memory and of the service that keeps it: how many messages the \
chat holds (ids go from 0 to that count minus one), the size of the view, whether Ever is in \
the middle of a turn right now, how many summaries are being written or are queued, and \
whether the memory is catching up on a backlog of summaries. Quick to call."""


NOTE_DESCRIPTION: Final = f"""\
Write a note into the user's evertalk chat, so that Ever, the user's main agent, which reads \
this memory at every turn, learns what happened here: a decision the user made, a result, a \
change to their files or plans, something to remember.

The note is added at the end of the chat as a message of kind note, tagged with the name of \
the agent that sent it, and stays there for good: it can never be edited or removed, and the \
user and Ever will see it. Write it as a statement that stands on its own (who decided what, \
and why; exact names, paths and numbers), leave out secrets, and add one only when the user \
would want Ever to know. At most {NOTE_MOST:,} characters; a short paragraph is best.

It is logged at once, even while Ever is in the middle of a turn (that turn does not see it; \
the next one does), and the call answers with the note's message id."""


NOTE_TEXT_DESCRIPTION: Final = "The note, as Ever should read it."


def build_server(memory: Memory) -> "MCPServer":
    """The MCP server of a home's memory, not yet running."""
    from typing import Annotated

    from mcp.server import MCPServer
    from mcp.server.mcpserver import Context
    from mcp_types import CallToolResult, TextContent, ToolAnnotations
    from pydantic import Field, WithJsonSchema

    from evertalk import __version__

    def text(content: str) -> CallToolResult:
        return CallToolResult(content=[TextContent(type="text", text=content)])

    def error(message: str) -> CallToolResult:
        return CallToolResult(content=[TextContent(type="text", text=message)], is_error=True)

    def answered(call: Callable[[], str]) -> CallToolResult:
        try:
            return text(call())
        except Refused as refusal:
            return error(str(refusal))

    # The integers come as they were sent, for `whole` to check: a wrong type gets one line
    # rather than a validation report, and a boolean is refused rather than taken for 0 or 1.
    def memory_view(
        part: Annotated[Any, WithJsonSchema(integer(PART_DESCRIPTION, 1))] = None,
    ) -> CallToolResult:
        def call() -> str:
            chosen = None if part is None else whole("part", part)
            return view_part(memory.ask(GetView(), View).text, chosen)

        return answered(call)

    def memory_zoom(
        id: Annotated[Any, WithJsonSchema(integer(ID_DESCRIPTION, 0))],
        n: Annotated[Any, WithJsonSchema(integer(N_DESCRIPTION, 1))],
    ) -> CallToolResult:
        def call() -> str:
            return memory.ask(GetZoom(id=whole("id", id), n=whole("n", n)), Zoom).text

        return answered(call)

    def memory_date(
        id: Annotated[Any, WithJsonSchema(integer(DATE_ID_DESCRIPTION, 0))],
    ) -> CallToolResult:
        return answered(lambda: memory.ask(GetDate(id=whole("id", id)), Date).text)

    def memory_status() -> CallToolResult:
        return answered(lambda: format_status(memory.ask(GetStatus(), Status)))

    def memory_note(
        text: Annotated[str, Field(description=NOTE_TEXT_DESCRIPTION)], ctx: Context
    ) -> CallToolResult:
        return answered(lambda: note(memory, text, client_name(ctx)))

    server: MCPServer = MCPServer(
        "evertalk",
        title="evertalk memory",
        instructions=INSTRUCTIONS,
        version=__version__,
        log_level="WARNING",
    )
    reading = ToolAnnotations(
        read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False
    )
    writing = ToolAnnotations(
        read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False
    )
    tools = (
        (memory_view, "Read the memory", VIEW_DESCRIPTION, reading),
        (memory_zoom, "Open a line of the memory", ZOOM_DESCRIPTION, reading),
        (memory_date, "When a message was written", DATE_DESCRIPTION, reading),
        (memory_status, "The memory's state", STATUS_DESCRIPTION, reading),
        (memory_note, "Leave a note in the chat", NOTE_DESCRIPTION, writing),
    )
    for function, title, description, hints in tools:
        # plain text results: what the service wrote, as Ever reads it
        server.add_tool(
            function,
            title=title,
            description=description,
            annotations=hints,
            structured_output=False,
        )
    return server


def integer(description: str, least: int) -> dict[str, Any]:
    """The JSON schema of an integer parameter."""
    return {"type": "integer", "minimum": least, "description": description}


def whole(name: str, value: object) -> int:
    """An id or a count as the tools take it: a whole number, or its digits in a string (some
    clients send every argument as a string). Refused otherwise, in one line."""
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise Refused(f"{name} must be a whole number, not {json.dumps(value)}")
    return value


def note(memory: Memory, text: str, client: str | None) -> str:
    """Log `text` as a note, tagged with the agent that sent it; where it went, in one line."""
    body = text.strip()
    if not body:
        raise Refused("the note is empty: write what Ever should know")
    if len(body) > NOTE_MOST:
        raise Refused(f"the note has {len(body):,} characters; at most {NOTE_MOST:,} fit in one")
    tag = f"[from {client} via MCP]" if client else "[via MCP]"
    # one key for all the tries of this call: a note resent after a lost connection is
    # recognized by the service and not logged twice
    key = f"mcp-note-{uuid.uuid4().hex}"
    message = OutsideMessage(kind="note", text=f"{tag} {body}", key=key)
    ids = memory.ask(Append(messages=[message]), Appended).ids
    if ids:
        return f"noted: the note is message {ids[0]} of the chat"
    return "noted: the chat already had this note"


NAME_MOST: Final = 60
_UNSAFE_NAME: Final = re.compile(r"[^A-Za-z0-9 ._-]+")


def client_name(ctx: Any) -> str | None:
    """The name the MCP client gave itself (`claude-code`, `codex-mcp-client`), if it did."""
    try:
        params = ctx.request_context.session.client_params
        name = params.client_info.name if params is not None else None
    except (AttributeError, LookupError, ValueError):  # clients need not name themselves
        return None
    if not isinstance(name, str):
        return None
    return safe_client_name(name)


def safe_client_name(name: str) -> str | None:
    """The name kept to letters, digits, spaces and `.`, `_`, `-` (each run of anything else
    becomes a space), at most 60 characters; None when nothing is left. It goes inside the
    note's tag, which a `]` or a line break would let it leave."""
    kept = " ".join(_UNSAFE_NAME.sub(" ", name).split())
    return kept[:NAME_MOST].rstrip() or None


def view_part(view: str, part: int | None) -> str:
    """The view, or one part of it when it is larger than PART_BYTES: lines whole, oldest
    first, with a first line that says which part it is. The parts are cut from the newest
    end, so that the newest part, the one given by default, is full; the oldest may be short."""
    parts: list[list[str]] = [[]]
    size = 0
    for line in reversed(view.split("\n")):
        length = len(line.encode()) + 1
        if parts[-1] and size + length > PART_BYTES:
            parts.append([])
            size = 0
        parts[-1].append(line)
        size += length
    parts = [part[::-1] for part in reversed(parts)]
    count = len(parts)
    if count == 1 and part in (None, 1):
        return view
    chosen = count if part is None else part
    if not 1 <= chosen <= count:
        raise Refused(f"part must be between 1 and {count} (the view has {count} parts now)")
    if chosen == count:
        where = "the newest lines"
    elif chosen == 1:
        where = "the oldest lines"
    else:
        where = "older lines"
    others = []
    if chosen > 1:
        others.append(f"part={chosen - 1} has the lines before these")
    if chosen < count:
        others.append(f"part={chosen + 1} the lines after")
    head = f"[part {chosen} of {count} of the view, {where}; {', '.join(others)}]"
    return "\n".join([head, *parts[chosen - 1]])


def format_status(status: Status) -> str:
    """The service's status reply as lines for a model: each field in words."""
    return "\n".join(status_lines(status))


def run_mcp(home: Path) -> int:
    """Serve `home`'s memory over standard input and output until the client closes them."""
    memory = Memory(home.expanduser())
    server = build_server(memory)
    try:
        server.run("stdio")
    except KeyboardInterrupt:
        return 130
    finally:
        memory.closed.set()
    return 0


def main(argv: list[str] | None = None) -> int:
    from evertalk.home import default_home

    parser = argparse.ArgumentParser(
        prog="python -m evertalk.mcp_server", description="evertalk's memory as an MCP server"
    )
    parser.add_argument("--home", type=Path, help="the evertalk folder (default ~/.evertalk)")
    args = parser.parse_args(argv)
    return run_mcp(args.home or default_home())


if __name__ == "__main__":
    from evertalk.secret_env import seal

    seal()
    sys.exit(main())
