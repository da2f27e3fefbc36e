"""The settle wait drives the compactor (SPEC §6.1, §4.5): while a turn waits, a node whose call
failed is tried again on the 10-second timer, without waiting for another message."""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from test_turn_support import collect_turn, opened, script, turn_bodies, user_texts, write_config

from evertalk.chat import Chat
from evertalk.compactor.service import RETRY_SECONDS
from evertalk.protocol.events import Settling
from fakes import AnthropicFake, fail, summarizer
from fakes import chat as answer

pytestmark = pytest.mark.anyio

LONG = "a long message about the nightly backups of ~/notes " * 20  # > 512 bytes


async def test_a_failed_node_is_retried_on_the_timer_while_the_turn_waits(tmp_path: Path) -> None:
    home = tmp_path / "home"
    write_config(home, settle=RETRY_SECONDS + 10)
    with Chat.open(home / "chat") as chat:
        chat.append("user", LONG)
    # a 400 is not retried by the SDK: one refused request is one failed call of the node
    fake = AnthropicFake(script(fail(400, times=1, then=summarizer(100))).push(answer("ok")))
    started = time.monotonic()
    async with opened(home, fake) as agent:
        agent.submit("and now?")
        seen = await collect_turn(agent, timeout=RETRY_SECONDS + 20)
        assert agent.compactor.calls == 1 and agent.compactor.built == 1
    waited = time.monotonic() - started
    assert isinstance(seen[0], Settling) and seen[0].unbuilt == 1
    view = user_texts(turn_bodies(fake)[0])
    assert "0+1|(not summarized yet: zoom it)" not in view  # the retry built it in time
    assert waited >= RETRY_SECONDS - 1  # the timer, not the next message, brought the retry
