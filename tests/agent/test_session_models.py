"""Changing models while the session runs: `Agent.use_model` for turns, `Agent.use_memory_model`
for the compactor. Each applies from the next call on and is saved in config.toml."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from test_turn_support import MEMORY_MODEL, MODEL, collect_turn, opened, script, turn_bodies

from evertalk.agent.session import Agent
from evertalk.config import ConfigError, load_config
from fakes import AnthropicFake

pytestmark = pytest.mark.anyio

NEW_MODEL = "claude-opus-5-5"
NEW_MEMORY_MODEL = "claude-sonnet-5-5"
LONG = "Please read this long note. " * 60


def compaction_bodies(fake: AnthropicFake) -> list[dict[str, Any]]:
    return [
        r.body
        for r in fake.records
        if r.body is not None and r.body.get("tool_choice") in ({"type": "none"}, "none")
    ]


async def compacted(agent: Agent) -> None:
    """Until the compactor has built every node and has no call running."""
    with anyio.fail_after(15):
        while agent.compactor.in_flight or agent.compactor.unbuilt():
            await anyio.sleep(0.02)


async def test_use_model_applies_to_the_next_turn_and_is_saved(home: Path) -> None:
    fake = AnthropicFake(script())
    async with opened(home, fake) as agent:
        agent.submit("first")
        await collect_turn(agent)
        agent.use_model(NEW_MODEL)
        assert agent.status().model == NEW_MODEL
        agent.submit("second")
        await collect_turn(agent)
    assert [body["model"] for body in turn_bodies(fake)] == [MODEL, NEW_MODEL]
    assert load_config(home, {}).model == NEW_MODEL
    ledger = (home / "usage.jsonl").read_text()
    assert f'"model":"{NEW_MODEL}"' in ledger.replace(" ", "")


async def test_use_memory_model_applies_to_the_next_compaction_and_is_saved(home: Path) -> None:
    fake = AnthropicFake(script())
    async with opened(home, fake) as agent:
        agent.submit(LONG)  # long enough to need a summary: a compaction call
        await collect_turn(agent)
        await compacted(agent)
        before = len(compaction_bodies(fake))
        agent.use_memory_model(NEW_MEMORY_MODEL, "low")
        agent.submit(LONG)
        await collect_turn(agent)
        await compacted(agent)
    bodies = compaction_bodies(fake)
    assert before > 0 and len(bodies) > before
    assert {body["model"] for body in bodies[:before]} == {MEMORY_MODEL}
    assert {body["model"] for body in bodies[before:]} == {NEW_MEMORY_MODEL}
    assert all(body["output_config"] == {"effort": "low"} for body in bodies[before:])
    saved = load_config(home, {}).memory
    assert (saved.model, saved.effort) == (NEW_MEMORY_MODEL, "low")


async def test_a_bad_value_changes_nothing(home: Path) -> None:
    fake = AnthropicFake(script())
    config = (home / "config.toml").read_bytes()
    async with opened(home, fake) as agent:
        with pytest.raises(ConfigError, match="`model`"):
            agent.use_model(" padded ")
        with pytest.raises(ConfigError, match=r"memory\.effort"):
            agent.use_memory_model(NEW_MEMORY_MODEL, "extreme")
        agent.use_memory_model(NEW_MEMORY_MODEL, None)  # None keeps the effort
        assert agent.model == MODEL
        assert agent.compactor.settings.model == NEW_MEMORY_MODEL
        assert agent.compactor.settings.effort == "high"
    assert (home / "config.toml").read_bytes() != config
    assert load_config(home, {}).model == MODEL
