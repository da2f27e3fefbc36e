"""The service as an async client sees it (the terminal app): one connection, its frames in
order, and requests answered by their `rid`.

The connection is made as `-p` makes it (`connection.py`: the service started if none answers,
the handshake), in a worker thread, then its socket is handed to anyio. One task reads: a reply
to a request wakes the request, every other frame (the agent's events, `ask`, `ask_closed`,
`stopping`) goes to `frames()` in order. When the service goes, `frames()` ends and the requests
waiting raise ServiceGone.
"""

from __future__ import annotations

import contextlib
import itertools
import math
import os
from collections.abc import AsyncIterator, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import anyio
import msgspec
from anyio.abc import SocketStream

from evertalk.client.connection import (
    BadFrame,
    Connection,
    RequestFailed,
    ServiceError,
    ServiceGone,
    Starting,
    connect,
    read_frame,
    reply_as,
    rid_of,
    split_lines,
)
from evertalk.protocol.frames import ServiceFrame, encode_frame
from evertalk.protocol.replies import RecordItem, Records, Welcome
from evertalk.protocol.requests import GetRecords, Request

__all__ = [
    "BadFrame",
    "Message",
    "Received",
    "Remote",
    "RequestFailed",
    "ServiceError",
    "ServiceGone",
    "open_remote",
]

R = TypeVar("R", bound=msgspec.Struct)

Received = ServiceFrame | BadFrame
"""What `frames()` gives: a frame, or the line that was none (said, and passed over)."""


@dataclass(frozen=True)
class Message:
    """A message of the log, as a `records` reply gives it."""

    i: int
    kind: str
    text: str
    key: str | None = None
    date: str = ""
    images: tuple[str, ...] = ()
    failed: bool = False  # an `echo` of a tool call that failed


class Remote:
    """An open connection to the service. `run` reads it (in a task of the caller's)."""

    def __init__(self, stream: SocketStream, connection: Connection) -> None:
        self.stream = stream
        self.welcome: Welcome = connection.welcome
        self._reader = connection.reader  # bytes the handshake read past the welcome
        self._early = list(connection.pending)  # … and its lines
        self._rids = itertools.count(1)
        self._waiting: dict[int, tuple[anyio.Event, list[Received]]] = {}
        self._in, self._out = anyio.create_memory_object_stream[Received](math.inf)
        self.gone = anyio.Event()
        self._send_lock = anyio.Lock()

    @property
    def name(self) -> str:
        """This client as the service names it in `sent` events."""
        return self.welcome.name

    @property
    def pid(self) -> int:
        return self.welcome.pid

    async def run(self) -> None:
        """Read until the service closes the connection (or this side does, or the service
        sends a line that is not a frame at all: where the next one starts is not known)."""
        try:
            if not self._take(self._early):
                return
            while True:
                try:
                    data = await self.stream.receive()
                except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
                    return
                except OSError:
                    return
                try:
                    lines = split_lines(self._reader, data)
                except BadFrame as bad:
                    self._dispatch(bad)
                    return
                if not self._take(lines):
                    return
        finally:
            self._closed()

    def _take(self, lines: Iterable[bytes]) -> bool:
        """Each line's frame to whoever waits for it; False once a line that is no frame at
        all ends the connection. A known frame with a wrong field is passed on as BadFrame,
        and the next line read."""
        for line in lines:
            try:
                frame = read_frame(line)
            except BadFrame as bad:
                self._dispatch(bad)
                if bad.problem == "not_a_frame":
                    return False
                continue
            if frame is not None:
                self._dispatch(frame)
        return True

    def _dispatch(self, frame: Received) -> None:
        rid = frame.rid if isinstance(frame, BadFrame) else rid_of(frame)
        waiting = self._waiting.pop(rid, None) if isinstance(rid, int) else None
        if waiting is not None:
            event, answer = waiting
            answer.append(frame)
            event.set()
            return
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._in.send_nowait(frame)

    def _closed(self) -> None:
        self.gone.set()
        self._in.close()
        for event, _ in self._waiting.values():
            event.set()  # with no answer: ServiceGone in `request`
        self._waiting.clear()

    async def frames(self) -> AsyncIterator[Received]:
        """Every frame that is not a reply, in order, and each line that was no frame (as
        BadFrame, its one line); it ends when the connection does."""
        async with self._out:
            async for frame in self._out:
                yield frame

    async def post(self, frame: msgspec.Struct) -> None:
        """Send a frame that gets no reply (an answer, a cancel). ServiceGone when gone."""
        data = encode_frame(frame)
        try:
            async with self._send_lock:
                await self.stream.send(data)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            raise ServiceGone("the service went away") from None

    async def request(self, request: Request, kind: type[R]) -> R:
        """Send a request and wait for its reply, of the type `kind`. RequestFailed for an
        error reply, BadFrame for another reply or one that is no frame, ServiceGone when
        the connection ends first."""
        if self.gone.is_set():
            raise ServiceGone("the service went away")
        rid = next(self._rids)
        event, answer = anyio.Event(), list[Received]()
        self._waiting[rid] = (event, answer)
        try:
            await self.post(msgspec.structs.replace(request, rid=rid))
            await event.wait()
        finally:
            self._waiting.pop(rid, None)
        if not answer:
            raise ServiceGone("the service went away")
        reply = answer[0]
        if isinstance(reply, BadFrame):
            raise reply
        return reply_as(reply, request, kind)

    async def records(self, **query: Any) -> list[Message]:
        """Messages of the log (the `records` request): `start`/`end`, or `last`/`kind`/`scan`."""
        reply = await self.request(GetRecords(**query), Records)
        return [message_of(item) for item in reply.records]

    async def aclose(self) -> None:
        await self.stream.aclose()


def message_of(item: RecordItem) -> Message:
    """A message of a `records` reply."""
    return Message(
        item.id, item.kind, item.text, item.key, item.date, tuple(item.images), item.failed
    )


async def open_remote(
    home: Path,
    client: str = "app",
    *,
    start: bool = True,
    starting: Starting | None = None,
    since: int | None = None,
    edits: int | None = None,
) -> Remote:
    """A connection to the service of `home` (started when none answers, with `start`; or the
    one `starting`, awaited); `since`: a client that follows the log from there (`missed`
    comes first), having applied `edits` in-place changes. ServiceError (one line) when it
    cannot be reached or refuses this client."""
    connection = await anyio.to_thread.run_sync(
        lambda: connect(home, client, start=start, starting=starting, since=since, edits=edits),
        abandon_on_cancel=True,
    )
    sock = connection.sock
    try:
        sock.setblocking(False)
        stream = await SocketStream.from_socket(sock)
    except OSError as error:
        connection.close()
        raise ServiceError(f"cannot use the service's connection: {error}") from None
    return Remote(stream, connection)


def working_folder() -> str:
    """The folder the client runs in, which the tools of its messages work in."""
    return os.getcwd()
