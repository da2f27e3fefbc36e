"""A turn that waits for a permission answer in one window: the other windows are told where
it waits (`asked_elsewhere`), and that it no longer does (`ask_closed`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

from evertalk.client.remote import Remote, open_remote
from fakes import AnthropicFake, ToolCall, reply
from fakes import chat as answer
from tui.tui_support import fake_opener, hosted, script, write_config

pytestmark = pytest.mark.anyio


async def first(frames: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    with anyio.fail_after(15):
        while not (found := [frame for frame in frames if frame["type"] == kind]):
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
        seen: list[list[dict[str, Any]]] = [[], []]

        async def read(remote: Remote, into: list[dict[str, Any]]) -> None:
            async for frame in remote.frames():
                into.append(frame)

        async with anyio.create_task_group() as group:
            for remote, frames in zip(windows, seen, strict=True):
                group.start_soon(remote.run)
                group.start_soon(read, remote, frames)
            sender = windows[0]
            await sender.request({"type": "send", "text": "say hi", "key": "k"})
            asked = await first(seen[0], "ask")
            told = await first(seen[1], "asked_elsewhere")
            assert told["id"] == asked["id"] and told["tool"] == "shell"
            assert str(told["client"]).startswith("app ")
            assert not [frame for frame in seen[1] if frame["type"] == "ask"]
            await sender.post({"type": "answer", "id": asked["id"], "decision": "once"})
            closed = await first(seen[1], "ask_closed")
            assert closed["id"] == asked["id"]
            for remote in windows:
                await remote.aclose()
