"""One connected client as the service sees it, and the checks at its connection: the peer's
user, the hello's protocol and version."""

from __future__ import annotations

import contextlib
import math
import os

import anyio
import msgspec
from anyio.abc import SocketAttribute, SocketStream

from evertalk import __version__
from evertalk.protocol import frames, wire
from evertalk.protocol.paths import peer_uid
from evertalk.protocol.replies import Error, ErrorKind
from evertalk.protocol.requests import Hello


class Session:
    """One connected client: its name, and an outbox that one task writes to the socket."""

    def __init__(
        self, stream: SocketStream, name: str, *, asked: bool = True, watcher: bool = False
    ) -> None:
        self.stream = stream
        self.name = name
        self.watcher = watcher  # it only looks (`service status`, `stop`): it holds nothing
        self.asked = asked  # it answers permission requests (a window, `-p`)
        self.follows = False  # it follows the log (`follow.py`): `logged` and `changed` go to it
        self.since: int | None = None  # where it follows from, until an agent can tell it
        self.edits: int | None = None  # the in-place changes it had applied, then
        self._outbox, self._pending = anyio.create_memory_object_stream[bytes](math.inf)
        self.written = anyio.Event()  # the outbox is closed and all of it went out

    def post(self, frame: msgspec.Struct | bytes) -> None:
        data = frame if isinstance(frame, bytes) else frames.encode_frame(frame)
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._outbox.send_nowait(data)

    async def write_out(self) -> None:
        try:
            with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                async for data in self._pending:
                    await self.stream.send(data)
        finally:
            self.written.set()

    def close(self) -> None:
        self._outbox.close()

    def refuse_unread(self) -> None:
        """A window that follows the log, and what it missed cannot be read now (a shared
        chat's database does not answer): told so, and let go, it connects again later and
        gives its position again."""
        self.follows = False
        self.post(error_frame("not_ready", UNREAD))
        self.close()

    async def close_unread(self) -> None:
        """`refuse_unread` before this session is served: what it was sent goes out first."""
        self.refuse_unread()
        await self.write_out()


UNREAD = "the chat's database does not answer: what this window missed cannot be read yet"


def error_frame(kind: ErrorKind, message: str) -> Error:
    return Error(kind=kind, message=message)


def refusal(hello: Hello | None) -> str | None:
    """Why a client's hello is refused: not a hello (None), another protocol or version."""
    if hello is None:
        return "the first frame must be a hello"  # answered as a refusal of kind `version`
    if hello.protocol != wire.PROTOCOL or hello.version != __version__:
        return (
            f"the service runs evertalk {__version__} (protocol {wire.PROTOCOL}) and this "
            f"client is {hello.version} (protocol {hello.protocol}): restart the "
            "service with `evertalk service stop`, and run the command again"
        )
    return None


def same_user(stream: SocketStream) -> bool:
    """Whether the peer runs as this user (SO_PEERCRED on Linux, getpeereid's source on macOS);
    on a system with no way to ask, the socket's mode and its folder's are the guard."""
    uid = peer_uid(stream.extra(SocketAttribute.raw_socket))
    return uid is None or uid == os.getuid()
