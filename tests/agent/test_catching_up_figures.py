"""One catching-up figure: the count a waiting turn shows and the count the status bar shows are
the same number with the same meaning (the summaries still to be built before the turn's view is
whole), and the turn's row says what its view costs meanwhile."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_catching_up import NEVER, caught, home, opened, template  # noqa: F401
from test_turn_support import collect_turn, script

from evertalk.protocol.events import AgentEvent, CatchingUp, catching_up_text
from fakes import AnthropicFake, slow, summarizer

pytestmark = pytest.mark.anyio


async def test_the_turn_row_and_the_status_bar_give_the_same_count(home: Path) -> None:  # noqa: F811
    fake = AnthropicFake(script(slow(NEVER, summarizer(100))))
    async with opened(home, fake, catch_up_timeout=NEVER) as agent:
        pairs: list[tuple[CatchingUp, CatchingUp | None]] = []

        def on(event: AgentEvent) -> None:
            if isinstance(event, CatchingUp) and not pairs:
                pairs.append((event, agent.status().catching_up))
                agent.cancel()

        agent.submit("what do you remember?")
        seen = await collect_turn(agent, on=on, timeout=30)
    assert caught(seen)
    ((row, bar),) = pairs
    assert bar is not None
    assert row.to_go == bar.to_go > 0
    assert row.view_tokens is not None and row.view_tokens > 0
    assert "tokens of view meanwhile" in catching_up_text(row)
    assert "tokens of view" not in catching_up_text(bar)
