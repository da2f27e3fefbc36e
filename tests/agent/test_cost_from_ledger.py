"""The cost the status bar shows comes from the ledger (this day's calls), not from the memory of
the process that serves the chat: a service that stops and starts again shows the same figure."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_turn_support import collect_turn, opened, script

from evertalk.ledger import ledger_path, read_records
from evertalk.protocol.events import TurnEnded
from fakes import AnthropicFake
from fakes import chat as answer

pytestmark = pytest.mark.anyio


async def test_the_days_cost_survives_a_restart_of_the_service(home: Path) -> None:
    async with opened(home, AnthropicFake(script().push(answer("Noted.")))) as agent:
        agent.submit("remember the milk")
        assert (await collect_turn(agent))[-1] == TurnEnded("done")
        spent = agent.status().cost
    assert spent > 0
    async with opened(home, AnthropicFake(script())) as agent:  # the service started again
        assert agent.status().cost == pytest.approx(spent)
    ledger = sum(r.cost or 0.0 for r in read_records(ledger_path(home)).records)
    assert spent == pytest.approx(ledger)
