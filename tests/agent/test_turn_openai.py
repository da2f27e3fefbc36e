"""A turn through the real OpenAI SDK against its fake: the same log, the same steering, the
layout the Chat Completions API wants (tool messages, then the user's text)."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_turn_support import collect_turn, log_of, opened, script, turn_bodies, write_config

from evertalk.prompts import TURN_MARKER
from evertalk.protocol.events import AgentEvent, Delivered, ToolStarted, TurnEnded
from fakes import OpenAIFake, ToolCall, reply
from fakes import chat as answer

pytestmark = pytest.mark.anyio


async def test_a_turn_with_a_tool_and_a_message_during_it(tmp_path: Path) -> None:
    home = tmp_path / "home"
    write_config(home)
    fake = OpenAIFake(
        script().push(
            reply("Looking.", ToolCall("shell", {"command": "sleep 0.3; echo found"})),
            answer("Found it; noted."),
        )
    )
    async with opened(home, fake, granted=["shell"]) as agent:

        def on(event: AgentEvent) -> None:
            if isinstance(event, ToolStarted):
                agent.submit("and the other one?")

        agent.submit("find it")
        seen = await collect_turn(agent, on=on)
    assert isinstance(seen[-1], TurnEnded) and seen[-1].reason == "done"
    assert Delivered("user", "and the other one?") in seen
    kinds = [kind for kind, _ in log_of(home)]
    assert kinds == ["user", "ever", "tool", "echo", "user", "ever"]
    first, second = turn_bodies(fake)
    system, user = first["messages"]
    assert system["role"] == "system" and user["role"] == "user"
    assert TURN_MARKER in str(user["content"]) and "find it" in str(user["content"])
    roles = [m["role"] for m in second["messages"]]
    assert roles == ["system", "user", "assistant", "tool", "user"]
    assert "found" in second["messages"][3]["content"]
    assert second["messages"][4]["content"] in (
        "and the other one?",
        [{"type": "text", "text": "and the other one?"}],
    )
    assert second["tools"] == first["tools"] and system == second["messages"][0]
