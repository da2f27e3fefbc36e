"""Messages logged from outside any turn (`Agent.record`): an import's history, another agent's
note. Each keeps its original time, is logged once per key, starts no turn, has known secrets
replaced, and is logged at once, a turn running or not."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import anyio
import pytest

from agent.test_turn_support import (
    API_KEY,
    collect_turn,
    log_of,
    opened,
    records_of,
    script,
    write_config,
)
from evertalk.agent.session import Outside
from evertalk.protocol.events import TurnStarted
from evertalk.providers.base import Image
from fakes import AnthropicFake, slow
from fakes import chat as answer

pytestmark = pytest.mark.anyio

PIXEL = (
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNk+M9QDwADhgGAWjR9a"
    "wAAAABJRU5ErkJggg=="
)
OLD = datetime(2024, 3, 1, 9, 30, tzinfo=UTC)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    write_config(home)
    return home


async def test_recorded_messages_keep_their_time_and_are_logged_once(home: Path) -> None:
    history = [
        Outside("user", "how do I rotate the logs?", OLD, key="src:1"),
        Outside("ever", "Use logrotate, weekly.", OLD, key="src:2"),
        Outside("note", f"decided elsewhere; the key {API_KEY} stays out", key="src:3"),
        Outside("user", "a picture", OLD, key="src:4", images=(Image("image/png", PIXEL),)),
    ]
    async with opened(home, AnthropicFake(script())) as agent:
        ids, skipped = agent.record(history)
        assert (ids, skipped) == ([0, 1, 2, 3], 0)
        again, skipped = agent.record(history)  # the same source read twice: nothing new
        assert (again, skipped) == ([], 4)
        assert not agent.busy  # no turn started for the imported user messages
        assert agent.chat.date(0).startswith("2024-03-01")
    log = log_of(home)
    assert [kind for kind, _ in log] == ["user", "ever", "note", "user"]
    assert API_KEY not in log[2][1]
    # each in the day file of its own date: the note is today's, the rest 2024's
    by_key = {record.get("key"): record for record in records_of(home)}
    assert sorted(by_key) == ["src:1", "src:2", "src:3", "src:4"]
    assert by_key["src:4"].get("images") and (home / "chat" / "images").is_dir()
    assert sorted(path.name[:10] for path in (home / "chat" / "main").glob("*.jsonl"))[0] == (
        "2024-03-01"
    )


async def test_a_note_during_a_turn_is_logged_at_once(home: Path) -> None:
    fake = AnthropicFake(script().push(slow(0.5, answer("Done."))))
    async with opened(home, fake) as agent:
        agent.submit("a question")
        with anyio.fail_after(10):
            async for event in agent.events():
                if isinstance(event, TurnStarted):
                    break
        assert agent.busy
        assert agent.record([Outside("note", "from another agent")]) == ([1], 0)
        await collect_turn(agent)
    assert log_of(home) == [
        ("user", "a question"),
        ("note", "from another agent"),
        ("ever", "Done."),
    ]
