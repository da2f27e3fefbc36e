"""Who waits for summaries (SPEC §4.5): a turn, and `memory compact` clients, each on its own.
One wait that ends leaves the compactor's retry timer to the others: a compact client that comes
and goes while a turn waits does not stop the turn's failed nodes from being retried."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from evertalk.client.remote import open_remote
from evertalk.protocol.replies import Compact
from evertalk.protocol.requests import GetCompact
from fakes import AnthropicFake
from tui.tui_support import fake_opener, hosted, script, write_config

pytestmark = pytest.mark.anyio


async def test_a_compact_client_that_leaves_ends_only_its_own_wait(tmp_path: Path) -> None:
    home = tmp_path / "home"
    write_config(home)
    async with hosted(home, fake_opener(home, AnthropicFake(script()))) as host:
        await host.connect()  # a window: the service starts
        service = host.service
        assert service is not None and service.agent is not None
        compactor = service.agent.compactor
        with compactor.waiting():  # a turn's wait, as agent/catch_up.py holds it
            async with anyio.create_task_group() as group:
                for _ in range(2):  # two compact clients, one after the other
                    client = await open_remote(home, "compact", start=False)
                    group.start_soon(client.run)
                    await client.request(GetCompact(), Compact)
                    assert compactor.waited_on
                    await client.request(GetCompact(), Compact)  # asked again: one wait still
                    await client.aclose()
                    with anyio.fail_after(15):
                        while service.compacting:
                            await anyio.sleep(0.01)
                    assert compactor.waited_on  # the turn still waits
        assert not compactor.waited_on

        client = await open_remote(home, "compact", start=False)
        async with anyio.create_task_group() as group:
            group.start_soon(client.run)
            await client.request(GetCompact(), Compact)
            assert compactor.waited_on  # the client's own wait
            await client.aclose()
        with anyio.fail_after(15):
            while compactor.waited_on:
                await anyio.sleep(0.01)
