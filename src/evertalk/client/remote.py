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
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import SocketStream

from evertalk.client.connection import (
    Connection,
    RequestFailed,
    ServiceError,
    ServiceGone,
    Starting,
    connect,
)
from evertalk.protocol import wire

__all__ = ["Message", "Remote", "RequestFailed", "ServiceError", "ServiceGone", "open_remote"]


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
        self.welcome = connection.welcome
        self._reader = connection.reader  # bytes the handshake read past the welcome
        self._early = list(connection.pending)
        self._rids = itertools.count(1)
        self._waiting: dict[int, tuple[anyio.Event, list[dict[str, Any]]]] = {}
        self._in, self._out = anyio.create_memory_object_stream[dict[str, Any]](math.inf)
        self.gone = anyio.Event()
        self._send_lock = anyio.Lock()

    @property
    def name(self) -> str:
        """This client as the service names it in `sent` events."""
        return str(self.welcome.get("name", ""))

    @property
    def pid(self) -> int:
        return int(self.welcome.get("pid", 0))

    async def run(self) -> None:
        """Read until the service closes the connection (or this side does)."""
        try:
            for frame in self._early:
                self._dispatch(frame)
            while True:
                try:
                    data = await self.stream.receive()
                except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
                    return
                except OSError:
                    return
                try:
                    frames = self._reader.feed(data)
                except wire.ProtocolError:
                    return
                for frame in frames:
                    self._dispatch(frame)
        finally:
            self._closed()

    def _dispatch(self, frame: dict[str, Any]) -> None:
        rid = frame.get("rid")
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

    async def frames(self) -> AsyncIterator[dict[str, Any]]:
        """Every frame that is not a reply, in order; it ends when the connection does."""
        async with self._out:
            async for frame in self._out:
                yield frame

    async def post(self, frame: dict[str, Any]) -> None:
        """Send a frame that gets no reply (an answer, a cancel). ServiceGone when gone."""
        data = wire.encode(frame)
        try:
            async with self._send_lock:
                await self.stream.send(data)
        except (anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
            raise ServiceGone("the service went away") from None

    async def request(self, frame: dict[str, Any]) -> dict[str, Any]:
        """Send a request and wait for its reply. RequestFailed for an error reply,
        ServiceGone when the connection ends first."""
        if self.gone.is_set():
            raise ServiceGone("the service went away")
        rid = next(self._rids)
        event, answer = anyio.Event(), list[dict[str, Any]]()
        self._waiting[rid] = (event, answer)
        try:
            await self.post({**frame, "rid": rid})
            await event.wait()
        finally:
            self._waiting.pop(rid, None)
        if not answer:
            raise ServiceGone("the service went away")
        reply: dict[str, Any] = answer[0]
        if reply.get("type") == "error":
            raise RequestFailed(str(reply.get("kind")), str(reply.get("message")))
        return reply

    async def records(self, **query: Any) -> list[Message]:
        """Messages of the log (the `records` request): `start`/`end`, or `last`/`kind`/`scan`."""
        reply = await self.request({"type": "records", **query})
        return [message_of(item) for item in reply["records"]]

    async def aclose(self) -> None:
        await self.stream.aclose()


def message_of(item: dict[str, Any]) -> Message:
    """A message of a `records` reply."""
    return Message(
        int(item["id"]),
        str(item["kind"]),
        str(item["text"]),
        item.get("key"),
        str(item.get("date", "")),
        tuple(item.get("images") or ()),
        item.get("failed") is True,
    )


async def open_remote(
    home: Path, client: str = "app", *, start: bool = True, starting: Starting | None = None
) -> Remote:
    """A connection to the service of `home` (started when none answers, with `start`; or the
    one `starting`, awaited). ServiceError (one line) when it cannot be reached or refuses this
    client."""
    connection = await anyio.to_thread.run_sync(
        lambda: connect(home, client, start=start, starting=starting), abandon_on_cancel=True
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
