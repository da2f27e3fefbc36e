"""A turn that waits for a permission answer in one window: the other windows are told where
it waits (`asked_elsewhere`), and that it no longer does (`ask_closed`)."""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

import anyio
import pytest

from evertalk.client.remote import Received, Remote, open_remote
from evertalk.protocol.replies import Accepted, Ask, AskClosed, AskedElsewhere
from evertalk.protocol.requests import Answer, Send
from fakes import AnthropicFake, ToolCall, reply
from fakes import chat as answer
from tui.tui_support import fake_opener, hosted, script, write_config

pytestmark = pytest.mark.anyio


F = TypeVar("F")


async def first(frames: list[Received], kind: type[F]) -> F:
    with anyio.fail_after(15):
        while not (found := [frame for frame in frames if isinstance(frame, kind)]):
            await anyio.sleep(0.01)
    return found[0]


async def test_the_other_windows_hear_where_the_turn_waits(tmp_path: Path) -> None:
    home = tmp_path / "home"
    write_config(home, shell="ask")
    call = ToolCall("shell", {"command": "echo hi"})
    fake = AnthropicFake(script().push(reply(call), answer("Done.")))
    async with hosted(home, fake_opener(home, fake)) as host:
        await host.connect()
        windows: list[Remote] = [await open_remote(home, "app", start=False) for _ in range(2)]
        seen: list[list[Received]] = [[], []]

        async def read(remote: Remote, into: list[Received]) -> None:
            async for frame in remote.frames():
                into.append(frame)

        async with anyio.create_task_group() as group:
            for remote, frames in zip(windows, seen, strict=True):
                group.start_soon(remote.run)
                group.start_soon(read, remote, frames)
            sender = windows[0]
            await sender.request(Send(text="say hi", key="k"), Accepted)
            asked = await first(seen[0], Ask)
            told = await first(seen[1], AskedElsewhere)
            assert told.id == asked.id and told.tool == "shell"
            assert told.client.startswith("app ")
            assert not [frame for frame in seen[1] if isinstance(frame, Ask)]
            await sender.post(Answer(id=asked.id, decision="once"))
            closed = await first(seen[1], AskClosed)
            assert closed.id == asked.id
            for remote in windows:
                await remote.aclose()
