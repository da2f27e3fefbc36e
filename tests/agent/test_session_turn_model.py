"""A message sent with a model of its own (`-p --model`): the turn it opens runs on that model,
the session's model and config.toml stay as they are, and a message that joins a turn already
under way leaves that turn on its model."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_turn_support import MODEL, collect_turn, opened, script, turn_bodies

from evertalk.config import load_config
from evertalk.protocol.events import AgentEvent, Delivered, ToolStarted, TurnStarted
from fakes import AnthropicFake, ToolCall, reply, slow
from fakes import chat as answer

pytestmark = pytest.mark.anyio

OTHER = "claude-opus-5-5"
THIRD = "claude-haiku-5-5"


def models(fake: AnthropicFake) -> list[str]:
    return [str(body["model"]) for body in turn_bodies(fake)]


async def test_a_message_with_a_model_runs_its_turn_on_it_alone(home: Path) -> None:
    config = (home / "config.toml").read_bytes()
    fake = AnthropicFake(script())
    async with opened(home, fake) as agent:
        agent.submit("on the other model", model=OTHER)
        await collect_turn(agent)
        assert agent.model == MODEL and agent.status().model == MODEL
        agent.submit("and on the usual one")
        await collect_turn(agent)
    assert models(fake) == [OTHER, MODEL]
    assert (home / "config.toml").read_bytes() == config and load_config(home, {}).model == MODEL
    ledger = (home / "usage.jsonl").read_text().replace(" ", "")
    assert f'"model":"{OTHER}"' in ledger  # priced and recorded as the model that answered


async def test_a_message_joining_a_running_turn_leaves_it_on_its_model(home: Path) -> None:
    fake = AnthropicFake(
        script().push(
            reply("Checking.", ToolCall("shell", {"command": "sleep 0.3; echo ok"})),
            answer("Done."),
            slow(0.3, answer("Next.")),
            answer("Last."),
        )
    )
    async with opened(home, fake, granted=["shell"]) as agent:

        def join(event: AgentEvent) -> None:
            if isinstance(event, ToolStarted):
                agent.submit("joins the turn", model=THIRD)  # taken between two calls

        agent.submit("check it", model=OTHER)
        first = await collect_turn(agent, on=join)

        def hold(event: AgentEvent) -> None:
            if isinstance(event, TurnStarted) and event.message_ids == [ids_before]:
                agent.submit("held for the next turn", model=THIRD)  # no call to take it

        ids_before = agent.chat.t
        agent.submit("plain")
        later = await collect_turn(agent, turns=2, on=hold)
    assert [e.text for e in first if isinstance(e, Delivered)] == ["joins the turn"]
    assert not any(isinstance(e, Delivered) for e in later)
    # the first turn's two calls on its model, whatever joined it; the held message opens the
    # next turn, on its own model
    assert models(fake) == [OTHER, OTHER, MODEL, THIRD]
