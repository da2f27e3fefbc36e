"""A turn cancelled while its reply streams: the call was made and its input billed from the
moment the stream began, so it is in the ledger (with the tokens the stream had reported, or an
estimate marked `estimated`), in the session's cost and so in the status bar and the exit line."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_turn_support import collect_turn, opened, script

from evertalk.ledger import ledger_path, read_records
from evertalk.protocol.events import AgentEvent, TextDelta, TurnEnded
from fakes import AnthropicFake, OpenAIFake, slow
from fakes import chat as answer

pytestmark = pytest.mark.anyio

REPLY = "the restore drill took forty minutes, and then " * 40


async def cancel_midway(home: Path, fake: AnthropicFake | OpenAIFake) -> float:
    async with opened(home, fake) as agent:

        def on(event: AgentEvent) -> None:
            if isinstance(event, TextDelta):
                agent.cancel()

        agent.submit("tell me about the drill")
        seen = await collect_turn(agent, on=on, timeout=30)
        assert seen[-1] == TurnEnded("cancelled")
        return agent.status().turn_cost


async def test_a_call_cancelled_midway_is_in_the_ledger_with_what_the_stream_said(
    home: Path,
) -> None:
    fake = AnthropicFake(script().push(slow(0.0, answer(REPLY), chunk_delay=0.2)))
    cost = await cancel_midway(home, fake)
    turns = [r for r in read_records(ledger_path(home)).records if r.role == "turn"]
    assert len(turns) == 1
    (call,) = turns
    # message_start reported the prompt: billed as such, and the call priced
    assert call.input + call.cache_read + call.cache_write > 0 and call.output > 0
    assert call.cost is not None and call.cost > 0 and cost == pytest.approx(call.cost)
    assert call.failed and call.estimated  # the output is what had streamed: an estimate


async def test_a_cancelled_call_with_no_usage_yet_is_estimated(home: Path) -> None:
    # OpenAI reports usage only at the end of a stream: the prompt is estimated from its bytes
    fake = OpenAIFake(script().push(slow(0.0, answer(REPLY), chunk_delay=0.2)))
    await cancel_midway(home, fake)
    (call,) = [r for r in read_records(ledger_path(home)).records if r.role == "turn"]
    assert call.estimated and call.failed and call.input > 1_000 and call.output > 0
