"""The compactor follows the turn: what a turn logs is summarized without waiting for the next
message, so the next turn finds its view settled."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from test_turn_support import collect_turn, opened, script

from fakes import AnthropicFake, ToolCall, reply
from fakes import chat as answer

pytestmark = pytest.mark.anyio

LONG = "word " * 200  # over 512 bytes: its leaf needs a model call


async def test_the_messages_a_turn_logs_are_built_before_the_next_message(home: Path) -> None:
    fake = AnthropicFake(
        script().push(
            reply(LONG, ToolCall("read", {"path": "missing.txt"})),
            answer(LONG),
        )
    )
    async with opened(home, fake) as agent:
        agent.submit("look at the notes")
        await collect_turn(agent)
        await agent.wait_idle()
        assert agent.chat.t == 5  # user, ever, tool, echo, ever
        tree = agent.chat.core.tree
        with anyio.fail_after(10):
            while not all(tree.is_built((0, i)) for i in range(agent.chat.t)):
                await anyio.sleep(0.01)
        assert agent.compactor.built >= 2  # the two long replies went through the model
