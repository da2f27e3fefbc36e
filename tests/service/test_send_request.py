"""`send`, over the service's real socket: the text a client sends is made what the log keeps
once, at the service's edge (valid Unicode, the known secrets replaced), and that text is what
is held, given to the model, shown in `sent` and `delivered`, and logged."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TypeVar

import anyio
import pytest
from anyio.abc import SocketStream

from evertalk import __version__
from evertalk.protocol import events, frames, replies, requests, wire
from evertalk.protocol.paths import socket_path
from fakes import AnthropicFake, ToolCall, constant, reply, slow
from fakes import chat as answer
from tui.tui_support import API_KEY, fake_opener, hosted, log_of, script, turn_bodies, write_config

pytestmark = pytest.mark.anyio

F = TypeVar("F")

TYPED = f"bad \udcff bytes, and my key {API_KEY}"  # a lone surrogate, as a broken pipe gives
KEPT = "bad \ufffd bytes, and my key [redacted]"


class Raw:
    """A client that writes its own lines (JSON a client of ours would not write) and reads
    every frame the service sends it."""

    def __init__(self, stream: SocketStream) -> None:
        self.stream = stream
        self.reader = wire.FrameReader()
        self.frames: list[Any] = []
        self.read = 0  # frames before it were returned or passed over

    async def send(self, frame: dict[str, Any]) -> None:
        await self.stream.send(json.dumps(frame).encode() + b"\n")  # `\udcff` escaped as is

    async def until(self, kind: type[F]) -> F:
        """The next frame of `kind` after the one this returned last."""
        with anyio.fail_after(15):
            while True:
                for at in range(self.read, len(self.frames)):
                    if isinstance(self.frames[at], kind):
                        self.read = at + 1
                        return self.frames[at]  # type: ignore[no-any-return]
                data = await self.stream.receive()
                self.frames += [frames.decode_frame(line) for line in self.reader.lines(data)]


async def test_a_sent_text_is_kept_as_the_log_keeps_it_from_the_start(tmp_path: Path) -> None:
    home = tmp_path / "home"
    write_config(home, shell="allow")
    fake = AnthropicFake(
        script().push(
            slow(1, constant(reply("Checking.", ToolCall("shell", {"command": "echo checked"})))),
            answer("Done."),
        )
    )
    async with hosted(home, fake_opener(home, fake)) as host:
        await (await host.connect()).aclose()  # starts the service
        async with await anyio.connect_unix(socket_path(home)) as stream:
            raw = Raw(stream)
            hello = requests.Hello(protocol=wire.PROTOCOL, version=__version__, client="raw")
            await stream.send(frames.encode_frame(hello))
            await raw.until(replies.Welcome)
            await raw.send({"type": "send", "text": "check the backups", "key": "one"})
            await raw.until(events.TurnStarted)
            await raw.send({"type": "send", "text": TYPED, "key": "two"})
            accepted = await raw.until(replies.Accepted)
            assert accepted.held is True
            held = (home / "chat" / "held.jsonl").read_text()
            assert "[redacted]" in held and API_KEY not in held
            sent = [f for f in raw.frames if isinstance(f, events.MessageSent)]
            assert [(f.text, f.key) for f in sent] == [("check the backups", "one"), (KEPT, "two")]
            delivered = await raw.until(events.Delivered)
            assert delivered.text == KEPT
            await raw.until(events.Quiet)
    assert ("user", KEPT) in log_of(home)
    told = json.dumps(turn_bodies(fake)[-1], ensure_ascii=False)
    assert KEPT in told and API_KEY not in told
