"""The service reads each request into its type (`protocol/frames.py`) over its real socket:
what comes back is a typed frame, a request it cannot read is answered by one `error` of a kind
with the request's `rid` and the connection goes on, and a hello it cannot read is refused as
one of another version."""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path

import msgspec
import pytest

from evertalk import __version__
from evertalk.protocol import frames, replies, requests, wire
from evertalk.protocol.paths import socket_path
from fakes import AnthropicFake
from served_home import fake, run, served_home

__all__ = ["fake"]


@pytest.fixture
def home(tmp_path: Path, fake: AnthropicFake) -> Iterator[Path]:
    with served_home(tmp_path, fake, stop=True) as home:
        started = run(home, "serve")
        assert started.returncode == 0, started.stderr
        yield home


class Raw:
    """A client of bytes: it writes lines and reads typed frames."""

    def __init__(self, home: Path) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(20)
        self.sock.connect(str(socket_path(home)))
        self.reader = wire.FrameReader()
        self.pending: list[bytes] = []

    def send(self, line: bytes) -> None:
        self.sock.sendall(line + b"\n")

    def read(self) -> frames.ServiceFrame:
        while not self.pending:
            data = self.sock.recv(65536)
            assert data, "the service closed the connection"
            self.pending += self.reader.lines(data)
        return frames.decode_frame(self.pending.pop(0))

    def reply(self) -> frames.ServiceFrame:
        """The next frame that is not an event (a welcome's warnings come first)."""
        while True:
            frame = self.read()
            if not isinstance(frame, frames.EventFrame):
                return frame


def test_requests_it_cannot_read_get_one_error_each_and_the_connection_goes_on(
    home: Path,
) -> None:
    raw = Raw(home)
    hello = requests.Hello(protocol=wire.PROTOCOL, version=__version__, client="t", pid=1)
    raw.send(frames.encode_frame(hello)[:-1])
    assert isinstance(raw.reply(), replies.Welcome)

    raw.send(b'{"type":"frob","rid":1}')
    assert raw.reply() == replies.Error(kind="protocol", message="unknown request 'frob'", rid=1)
    raw.send(b'{"type":"zoom","id":"8","n":1,"rid":"two"}')
    said = "zoom: id is a whole number, not '8'"
    assert raw.reply() == replies.Error(kind="bad_request", message=said, rid="two")
    raw.send(b'{"type":"send","rid":3}')
    assert raw.reply() == replies.Error(kind="bad_request", message="send: 'text'", rid=3)

    raw.send(frames.encode_frame(requests.GetStatus(rid=4))[:-1])
    status = raw.reply()
    assert isinstance(status, replies.Status) and status.rid == 4 and status.clients == 1
    raw.send(frames.encode_frame(requests.GetView())[:-1])
    view = raw.reply()
    assert isinstance(view, replies.View) and view.rid is msgspec.UNSET
    raw.sock.close()


def test_a_hello_it_cannot_read_is_refused_as_another_versions(home: Path) -> None:
    raw = Raw(home)
    raw.send(b'{"type":"hello","protocol":"two","version":"' + __version__.encode() + b'"}')
    refused = raw.reply()
    assert isinstance(refused, replies.Error) and refused.kind == "version"
    assert f"this service runs evertalk {__version__}" in refused.message
    assert "\n" not in refused.message
    raw.sock.close()


def test_a_line_that_is_no_frame_ends_the_connection_with_a_protocol_error(home: Path) -> None:
    raw = Raw(home)
    hello = requests.Hello(protocol=wire.PROTOCOL, version=__version__, client="t")
    raw.send(frames.encode_frame(hello)[:-1])
    assert isinstance(raw.reply(), replies.Welcome)
    raw.send(b"not json")
    assert raw.reply() == replies.Error(kind="protocol", message="a frame that is not JSON")
    assert raw.sock.recv(65536) == b""
    raw.sock.close()
