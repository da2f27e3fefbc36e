"""`/clear` takes the rows off the screen and keeps the chat (Page Up brings them back);
`/compact` builds the summaries now, as `evertalk memory compact` does, a row showing how far
it got."""

from __future__ import annotations

from pathlib import Path

import pytest
from tui_support import (
    agent_of,
    app_of,
    command_row,
    enter_line,
    is_compaction,
    log_of,
    running,
    script,
    wait_until,
)

from evertalk.chat import Chat
from evertalk.tui.widgets import ReplyView, UserRow
from fakes import AnthropicFake, Script, slow, summarizer
from fakes import chat as answer

pytestmark = pytest.mark.anyio


async def test_clear_empties_the_screen_and_keeps_the_chat(home: Path) -> None:
    fake = AnthropicFake(script().push(answer("Hi.")))
    async with running(home, fake) as pilot:
        app = app_of(pilot)
        await enter_line(pilot, "hello")
        await wait_until(pilot, lambda: len(log_of(home)) == 2 and not app.busy)
        await wait_until(pilot, lambda: bool(app.query(ReplyView)))
        row = await command_row(pilot, "/clear")
        assert list(app.chat_log.children) == [row]
        assert row.text.startswith("screen cleared; the chat and Ever's memory of it are kept")
        assert log_of(home) == [("user", "hello"), ("ever", "Hi.")]
        await pilot.press("pageup")  # the chat comes back above the row
        await wait_until(pilot, lambda: [r.text for r in app.query(UserRow)] == ["hello"])
        assert list(app.chat_log.children)[-1] is row


async def test_compact_builds_the_summaries_now(home: Path) -> None:
    with Chat.open(home / "chat") as chat:
        for n in range(4):  # each leaf needs a call
            chat.append("user", f"note {n}: the restore drill took forty minutes; " * 20)
    fake = AnthropicFake(Script().route(is_compaction, slow(2.0, summarizer(100))))
    async with running(home, fake) as pilot:
        app = app_of(pilot)
        row = await command_row(pilot, "/compact")
        await wait_until(pilot, lambda: row.text.startswith("["))  # how far, while it builds
        await wait_until(pilot, lambda: row.text.startswith("summaries built"), timeout=30)
        compactor = agent_of(app).compactor
        assert compactor.unbuilt() == 0
        assert "model call" in row.text
        await wait_until(pilot, lambda: not compactor.waited_on)  # its connection is closed
        again = await command_row(pilot, "/compact")
        await wait_until(pilot, lambda: again.text.startswith("the summaries are all built"))
