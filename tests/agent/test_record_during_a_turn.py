"""A note from another agent, or a captured message, is not part of the running turn: it is
logged at once, even while the turn waits for the user's answer to a permission question."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from test_turn_support import log_of, opened, script

from evertalk.agent.permissions import Decision
from evertalk.agent.session import Outside
from evertalk.protocol.events import TurnEnded
from fakes import AnthropicFake, ToolCall, reply
from fakes import chat as answer

pytestmark = pytest.mark.anyio


class Waiting:
    """An asker whose question stays open until the test answers it."""

    def __init__(self) -> None:
        self.asked = anyio.Event()
        self.answered = anyio.Event()

    async def ask(self, tool: str, tool_input: dict[str, Any]) -> Decision:
        self.asked.set()
        await self.answered.wait()
        return "once"


async def test_a_note_is_logged_at_once_while_a_question_is_open(home: Path) -> None:
    call = ToolCall("shell", {"command": "echo done"})
    fake = AnthropicFake(script().push(reply("Running it.", call), answer("It ran.")))
    asker = Waiting()
    async with opened(home, fake, asker=asker) as agent:
        agent.submit("run it")
        with anyio.fail_after(10):
            await asker.asked.wait()
        ids, skipped = agent.record([Outside("note", "from another agent", key="n1")])
        assert (ids, skipped) == ([3], 0)
        asker.answered.set()
        with anyio.fail_after(10):
            async for event in agent.events():
                if isinstance(event, TurnEnded):
                    break
    log = log_of(home)
    assert [kind for kind, _ in log] == ["user", "ever", "tool", "note", "echo", "ever"]
    assert log[3] == ("note", "from another agent")
