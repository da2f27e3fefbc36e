"""Each role sends its own prompt cache key (SPEC §7: stable per chat and per role): turns,
subagents and compactions never share one, and none of them holds the home's path."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_turn_support import collect_turn, is_compaction, opened, script

from evertalk.runtime import cache_key
from fakes import Call, OpenAIFake, ToolCall, reply, slow
from fakes import chat as answer

pytestmark = pytest.mark.anyio


def is_scout(call: Call) -> bool:
    return "you are the subagent Scout," in call.last_user_text


async def test_turns_and_subagents_send_their_own_keys(home: Path) -> None:
    fake = OpenAIFake(
        script()
        .route(is_scout, slow(0.2, answer("There are 3 files.")))
        .push(
            reply(ToolCall("agent", {"name": "Scout", "task": "count the files"})),
            answer("Scout is on it."),
            answer("Scout found 3 files."),
        )
    )
    async with opened(home, fake) as agent:
        agent.submit("have Scout count my notes")
        await collect_turn(agent, turns=2)
    calls = fake.behaviour.calls  # type: ignore[attr-defined]
    keys = {call.body.get("prompt_cache_key") for call in calls if is_scout(call)}
    assert keys == {cache_key(home, "subagent")}
    turns = [c for c in calls if not is_scout(c) and not is_compaction(c)]
    assert len(turns) == 3
    assert {call.body.get("prompt_cache_key") for call in turns} == {cache_key(home, "turn")}
    compactions = {c.body.get("prompt_cache_key") for c in calls if is_compaction(c)}
    assert compactions <= {cache_key(home, "compaction")}
    assert all(str(home) not in str(call.body.get("prompt_cache_key")) for call in calls)
