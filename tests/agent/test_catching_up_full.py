"""The issue's own case, full size: a 3,000-message chat with no summaries (an import, a lost
tree), the default 200,000-token window and the API's own check of it. The first message is
answered after a visible wait, and no request (turn or compaction) goes over the window."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from test_catching_up import caught, estimate, opened
from test_turn_support import (
    collect_turn,
    log_of,
    script,
    turn_bodies,
    write_config,
)

from evertalk.agent.turn import Limits
from evertalk.protocol.events import TurnEnded, TurnStarted
from evertalk.store.records import encode_message
from fakes import AnthropicFake, summarizer
from fakes import chat as answer

MESSAGES = 3_000
WINDOW = 200_000


def behind_home(home: Path) -> None:
    """3,000 messages of a real chat's sizes (50 B to 5 KB, tool output up to 12 KB) written as
    an import would leave them: a log, no tree, no index, no view.json."""
    write_config(home)
    rng = random.Random(9)
    lines = []
    for i in range(MESSAGES):
        kind = rng.choice(["user", "ever", "tool", "echo"])
        # most messages are short, so their lines are the messages themselves (free leaves),
        # and those cannot merge while the parents above the long ones are unbuilt
        size = rng.choice([100, 300, 450, 450, 2_000, 5_000] + [12_000] * (kind == "echo"))
        text = f"{kind} {i}: " + " ".join(
            rng.choice(["backup", "disk", "note", "é"]) for _ in range(size // 6)
        )
        lines.append(encode_message(i, kind, text, "2026-10-01T09:00:00+02:00"))
    main = home / "chat" / "main"
    main.mkdir(parents=True, mode=0o700)
    (main / "2026-10-01.jsonl").write_bytes(b"\n".join(lines) + b"\n")


@pytest.mark.slow
@pytest.mark.anyio
async def test_a_3000_message_chat_with_no_tree_answers_its_first_message(tmp_path: Path) -> None:
    home = tmp_path / "home"
    behind_home(home)
    fake = AnthropicFake(script(summarizer(200)).push(answer("Caught up.")), context_window=WINDOW)
    async with opened(home, fake, limits=Limits(context_budget=WINDOW)) as agent:
        agent.submit("what did we decide about the backups?")
        seen = await collect_turn(agent, timeout=600)
    started = next(i for i, event in enumerate(seen) if isinstance(event, TurnStarted))
    assert caught(seen[:started]), "the wait was not shown"
    assert seen[-1] == TurnEnded("done")
    assert log_of(home)[-1] == ("ever", "Caught up.")
    assert [r.status for r in fake.records if r.status != 200] == []  # none over the window
    (body,) = turn_bodies(fake)
    assert estimate(body) <= WINDOW
