"""The `search` tool leaves out what the running turn already has before it: its own calls,
which would otherwise match their own query best."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_tools_search import enable_search
from test_turn_support import collect_turn, opened, script, turn_bodies

from evertalk.chat import Chat
from fakes import AnthropicFake, ToolCall, reply
from fakes import chat as answer

pytestmark = pytest.mark.anyio


async def test_a_search_does_not_find_its_own_call(home: Path) -> None:
    with Chat.open(home / "chat") as chat:
        chat.append("user", "the staging gateway listens on port 8443")
        chat.append("ever", "Noted.")
    enable_search(home)
    searches = [ToolCall("search", {"query": "staging gateway"})] * 2
    fake = AnthropicFake(script().push(reply(searches[0]), reply(searches[1]), answer("8443.")))
    async with opened(home, fake) as agent:
        agent.submit("which port again?")
        await collect_turn(agent)
    bodies = turn_bodies(fake)
    for body in bodies[1:]:
        (block,) = body["messages"][-1]["content"][0]["content"]
        headers = [line for line in block["text"].splitlines() if not line.startswith("  ")]
        assert [line.split()[0] for line in headers] == ["0+1"], block["text"]
