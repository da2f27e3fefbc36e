"""Every client reads the service's frames as their types: a frame of a type this client does not
know (a newer service's) is skipped, and a line that is no frame, or a known frame with a field
missing or wrong, is one typed error (`BadFrame`) with a one-line message. Both connections, the
blocking one (`-p` and the commands) and the async one (the app), are checked against a fake
service on the other end of a socket pair."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import anyio
import pytest
from anyio.abc import SocketStream

from evertalk.client.connection import BadFrame, Connection, ServiceError, ServiceGone
from evertalk.client.remote import Received, Remote
from evertalk.protocol.events import MemoryWarning, TextDelta
from evertalk.protocol.replies import View, Welcome
from evertalk.protocol.requests import GetView

WELCOME = Welcome(protocol=2, version="0", pid=os.getpid(), home="/nowhere", name="test 1")
UNKNOWN = b'{"type":"frob","text":"from a newer service"}\n'
WARNING = b'{"type":"memory_warning","text":"memory: a warning"}\n'

Script = Callable[[object], list[bytes]]
"""What the fake service sends for a request: its lines, given the request's `rid`."""


def reply_line(frame: dict[str, object]) -> bytes:
    return json.dumps(frame).encode() + b"\n"


def rid_of(line: bytes) -> object:
    request = json.loads(line)
    assert request["type"] == "view"  # every test asks for the view
    return request["rid"]


# -- the blocking connection ----------------------------------------------------------------


@contextmanager
def served(script: Script) -> Iterator[Connection]:
    """A connection whose other end answers each request with the lines `script` gives."""
    ours, theirs = socket.socketpair()

    def serve() -> None:
        with theirs, theirs.makefile("rb") as lines:
            for line in lines:
                theirs.sendall(b"".join(script(rid_of(line))))

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    connection = Connection(ours, WELCOME)
    try:
        yield connection
    finally:
        connection.close()
        thread.join(5)


def test_a_frame_of_an_unknown_type_is_skipped() -> None:
    def script(rid: object) -> list[bytes]:
        view = reply_line({"type": "view", "text": "<chat/>", "rid": rid})
        return [UNKNOWN, WARNING, UNKNOWN, view]

    with served(script) as connection:
        assert connection.request(GetView(), View).text == "<chat/>"
        assert connection.pid == os.getpid() and connection.welcome.name == "test 1"
    with served(script) as connection:
        connection.send(GetView(rid="r"))
        assert connection.receive() == MemoryWarning(text="memory: a warning")
        assert isinstance(connection.receive(), View)


@pytest.mark.parametrize(
    ("line", "problem", "said"),
    [
        (b'{"type":"view","rid":"RID"}\n', "bad_fields", "view: 'text'"),
        (b'{"type":"text_delta"}\n', "bad_fields", "text_delta: 'text'"),
        (b"not json\n", "not_a_frame", "a frame that is not JSON"),
        (b'["a", "list"]\n', "not_a_frame", "a frame that is not an object with a type"),
    ],
)
def test_a_broken_frame_is_one_typed_error_in_one_line(
    line: bytes, problem: str, said: str
) -> None:
    def script(rid: object) -> list[bytes]:
        return [line.replace(b"RID", str(rid).encode())]

    with served(script) as connection, pytest.raises(BadFrame) as caught:
        connection.request(GetView(), View)
    message = str(caught.value)
    assert message == f"the service sent a broken frame: {said}"
    assert "\n" not in message and caught.value.problem == problem


def test_the_end_of_the_connection_is_still_service_gone() -> None:
    with served(lambda rid: []) as connection:
        connection.send(GetView(rid=1))
        connection.sock.shutdown(socket.SHUT_WR)  # the fake service reads to the end, and goes
        with pytest.raises(ServiceGone):
            connection.receive()


# -- the async connection (the app's) -------------------------------------------------------


async def remote_served(ours: socket.socket, theirs: socket.socket) -> tuple[Remote, SocketStream]:
    """The app's connection on `ours` (its handshake taken as done), the service's on `theirs`."""
    ours.setblocking(False)
    theirs.setblocking(False)
    remote = Remote(await SocketStream.from_socket(ours), Connection(ours, WELCOME))
    return remote, await SocketStream.from_socket(theirs)


async def serve_stream(stream: SocketStream, script: Script) -> None:
    """Answer each request line with the lines `script` gives, until the client goes."""
    buffer = b""
    async with stream:
        while True:
            try:
                buffer += await stream.receive()
            except (anyio.EndOfStream, anyio.BrokenResourceError, anyio.ClosedResourceError):
                return
            while b"\n" in buffer:
                line, buffer = buffer.split(b"\n", 1)
                with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError):
                    await stream.send(b"".join(script(rid_of(line))))


async def exchange(
    script: Script, pushed: list[bytes]
) -> tuple[list[Received], View | ServiceError]:
    """Send `pushed` unasked, then ask for the view: the frames the app would get (until the
    connection ends or the request is answered), and the request's reply or error."""
    ours, theirs = socket.socketpair()
    remote, service = await remote_served(ours, theirs)
    seen: list[Received] = []
    with anyio.fail_after(10):
        async with anyio.create_task_group() as group:
            group.start_soon(remote.run)
            group.start_soon(serve_stream, service, script)
            for line in pushed:
                await service.send(line)

            async def read() -> None:
                async for frame in remote.frames():
                    seen.append(frame)

            group.start_soon(read)
            try:
                answer: View | ServiceError = await remote.request(GetView(), View)
            except ServiceError as error:
                answer = error
            # closed: `run` ends, and `frames()` once it has given all it holds; the service
            # reads the end of the stream
            await remote.aclose()
    return seen, answer


@pytest.mark.anyio
async def test_the_app_gets_no_frame_of_an_unknown_type() -> None:
    def script(rid: object) -> list[bytes]:
        return [UNKNOWN, reply_line({"type": "view", "text": "<chat/>", "rid": rid})]

    seen, answer = await exchange(script, [UNKNOWN, WARNING])
    assert seen == [MemoryWarning(text="memory: a warning")]
    assert answer == View(text="<chat/>", rid=1)


@pytest.mark.anyio
async def test_the_app_gets_a_broken_frame_as_one_line_and_reads_on() -> None:
    def script(rid: object) -> list[bytes]:
        return [reply_line({"type": "view", "rid": rid})]  # its text missing

    broken = b'{"type":"text_delta"}\n'
    seen, answer = await exchange(script, [broken, b'{"type":"text_delta","text":"next"}\n'])
    assert isinstance(answer, BadFrame)
    assert str(answer) == "the service sent a broken frame: view: 'text'"
    first, second = seen
    assert isinstance(first, BadFrame) and first.problem == "bad_fields"
    assert str(first) == "the service sent a broken frame: text_delta: 'text'"
    assert second == TextDelta(text="next")


@pytest.mark.anyio
async def test_a_line_that_is_no_frame_ends_the_app_s_connection() -> None:
    def script(rid: object) -> list[bytes]:
        return [reply_line({"type": "view", "text": "never read", "rid": rid})]

    seen, answer = await exchange(script, [b"not json\n", WARNING])
    (said,) = seen  # nothing after it: where the next frame starts is not known
    assert isinstance(said, BadFrame) and said.problem == "not_a_frame"
    assert str(said) == "the service sent a broken frame: a frame that is not JSON"
    assert isinstance(answer, ServiceGone)  # the request waited on a connection that ended
