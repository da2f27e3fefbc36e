"""A turn after a large import: the chat is far behind, and the model's window (200,000 tokens)
could take its whole unmerged view of about 600 KB. The view's ceiling is the bound all the same
(SPEC §3.2): the first turn sends at most 128 KB of view, the oldest messages as coarse lines, and
the next turn, with nothing built meanwhile, sends the same lines with its own after them, so
that it reads them from the cache."""

from __future__ import annotations

import random
import re
from pathlib import Path

import pytest
from test_catching_up import COARSE, NEVER, caught, opened
from test_turn_support import collect_turn, script, turn_bodies, user_texts, write_config

from evertalk.agent.turn import Limits
from evertalk.memory.budget import Budget
from evertalk.protocol.events import MemoryWarning, TurnEnded
from evertalk.store.records import encode_message
from fakes import AnthropicFake, slow, summarizer
from fakes import chat as answer

pytestmark = pytest.mark.anyio

IMPORTED = 1_500
WINDOW = 200_000
VIEW = re.compile(r"<chat>\n.*?\n</chat>", re.DOTALL)


def imported_home(home: Path) -> None:
    """1,500 messages as an import leaves them: a log, no tree, no view.json. Most are short
    enough to be their own lines, so that nothing merges before a summary is built."""
    write_config(home)
    rng = random.Random(23)
    lines = []
    for i in range(IMPORTED):
        kind = rng.choice(["user", "ever"])
        size = rng.choice([120, 300, 420, 480, 900])
        text = f"{kind} {i}: " + " ".join(
            rng.choice(["backup", "disk", "cron"]) for _ in range(size // 6)
        )
        lines.append(encode_message(i, kind, text, "2026-10-01T09:00:00+02:00"))
    main = home / "chat" / "main"
    main.mkdir(parents=True, mode=0o700)
    (main / "2026-10-01.jsonl").write_bytes(b"\n".join(lines) + b"\n")


def view_of(body: dict[str, object]) -> str:
    found = VIEW.search(user_texts(body))  # type: ignore[arg-type]
    assert found is not None
    return found[0]


def prompt_tokens(fake: AnthropicFake) -> list[int]:
    """What each turn's request was billed as prompt: uncached, read and written."""
    return [
        r.input_tokens + r.cache_read + r.cache_write
        for r in fake.records
        if r.body is not None and r.body in turn_bodies(fake)
    ]


async def test_the_first_turns_after_an_import_send_at_most_the_views_ceiling(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    imported_home(home)
    fake = AnthropicFake(
        script(slow(NEVER, summarizer(100))).push(answer("First.")).push(answer("Second.")),
        context_window=WINDOW,
    )
    async with opened(
        home, fake, catch_up_timeout=0.5, limits=Limits(context_budget=WINDOW)
    ) as agent:
        agent.submit("what did we decide about the backups?")
        first = await collect_turn(agent, timeout=120)
        agent.submit("and the disk?")
        second = await collect_turn(agent, timeout=120)
    tokens = prompt_tokens(fake)
    print(f"prompt tokens of the turns after a {IMPORTED:,}-message import: {tokens}")
    assert first[-1] == TurnEnded("done") and second[-1] == TurnEnded("done")
    assert caught(first)
    assert any(isinstance(event, MemoryWarning) for event in first)
    one, two = (view_of(body) for body in turn_bodies(fake))
    ceiling = Budget().ceiling
    assert len(one.encode()) <= ceiling and len(two.encode()) <= ceiling
    assert COARSE.search(one) and COARSE.search(one)[1] == "0"  # type: ignore[index]
    # nothing was built between the turns: the second view is the first one, grown at its end
    assert two.startswith(one.removesuffix("</chat>"))
    assert tokens[0] <= ceiling // 3
    record = [r for r in fake.records if r.body is not None and r.body in turn_bodies(fake)][1]
    assert record.cache_read >= len(one.encode()) // 4 - 1_000  # the view came from the cache
