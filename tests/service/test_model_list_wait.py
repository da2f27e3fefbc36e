"""`/model` asks the provider's server for its models; the service waits for that answer in a
worker thread, so that every other window is answered meanwhile."""

from __future__ import annotations

import socket
from pathlib import Path

import anyio
import pytest

from evertalk.protocol.replies import Output, Status
from evertalk.protocol.requests import Command, GetStatus
from fakes import AnthropicFake
from tui.tui_support import fake_opener, hosted, script, write_config

pytestmark = pytest.mark.anyio


async def test_other_windows_are_answered_while_the_model_list_is_asked(tmp_path: Path) -> None:
    with socket.socket() as stalling:  # a server that takes the connection and says nothing
        stalling.bind(("127.0.0.1", 0))
        stalling.listen()
        stalling.settimeout(10)  # a bug that never asks fails the test, not hangs it
        home = tmp_path / "home"
        write_config(home, base_url=f"http://127.0.0.1:{stalling.getsockname()[1]}")
        fake = AnthropicFake(script())
        async with hosted(home, fake_opener(home, fake)) as host:
            asking, other = await host.connect(), await host.connect()
            answered: dict[str, Output] = {}
            done = anyio.Event()

            async def ask_for_models() -> None:
                answered["model"] = await asking.request(Command(name="/model"), Output)
                done.set()

            with anyio.fail_after(30):
                async with anyio.create_task_group() as group:
                    group.start_soon(asking.run)
                    group.start_soon(other.run)
                    group.start_soon(ask_for_models)
                    connection, _ = await anyio.to_thread.run_sync(stalling.accept)
                    status = await other.request(GetStatus(), Status)
                    still_asking = "model" not in answered
                    connection.close()  # the server hangs up: `/model` goes on without a list
                    await done.wait()
                    await asking.aclose()
                    await other.aclose()
    assert isinstance(status, Status)
    assert still_asking  # answered while the list was still awaited, not after it
    assert answered["model"].texts[0].startswith("turn model: ")
