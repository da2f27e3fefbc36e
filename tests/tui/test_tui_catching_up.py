"""The terminal app on a chat that is behind: while the turn waits for the chat to catch up, a
row says how far it is (`catching up: 12 summaries to go, …`); a message sent meanwhile joins
the turn; the row goes when the turn starts, and a `memory:` row says when the turn went on
with coarse lines."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from tui_support import (
    API_KEY,
    SIZE,
    enter_line,
    is_compaction,
    log_of,
    wait_until,
    write_config,
)

from evertalk.agent.session import Agent
from evertalk.agent.turn import Limits
from evertalk.chat import Chat
from evertalk.memory.text import LINE_LIMIT
from evertalk.providers.anthropic import AnthropicProvider
from evertalk.tui.app import AgentOpener, ChatApp, hosting
from evertalk.tui.widgets import NoteRow, ReplyView
from fakes import IN_PROCESS_URL, AnthropicFake, Script, async_client, sized_line, slow, summarizer
from fakes import chat as answer

pytestmark = pytest.mark.anyio

MESSAGES = 64  # free leaves of 512 bytes: a view of 33 KB, whole text, that nothing merged yet
WINDOW = Limits(max_tokens=1_000, context_budget=12_000)  # room for about 26 KB of view
CATCH_UP_TIMEOUT = 3.0  # seconds the row stays up: summaries never come here
NEVER = 3600.0
PROGRESS = re.compile(
    r"catching up: [\d,]+ summar(y|ies) to go, estimating… \(Ctrl\+C cancels the turn\)"
)


def behind(home: Path) -> None:
    write_config(home)
    with Chat.open(home / "chat") as chat:
        for i in range(MESSAGES):
            chat.append("user", sized_line(f"note {i} on the backups", LINE_LIMIT - len("user: ")))


def small_window(home: Path, fake: AnthropicFake) -> AgentOpener:
    """Opens the app's agent on the in-process fake with a small context window."""

    @asynccontextmanager
    async def open_agent(app: ChatApp) -> AsyncIterator[Agent]:
        provider = AnthropicProvider(API_KEY, IN_PROCESS_URL, http_client=async_client(fake.app))
        workdir = home.parent / "work"
        workdir.mkdir(exist_ok=True)
        try:
            async with Agent.open(
                home,
                asker=app,
                provider=provider,
                workdir=workdir,
                limits=WINDOW,
                catch_up_timeout=CATCH_UP_TIMEOUT,
            ) as agent:
                yield agent
        finally:
            await provider.aclose()

    return open_agent


def notes(app: ChatApp) -> list[str]:
    return [row.text for row in app.query(NoteRow)]


def replies(app: ChatApp) -> list[str]:
    return [view.source for view in app.query(ReplyView)]


async def test_catching_up_is_shown_and_a_message_sent_meanwhile_joins_the_turn(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    behind(home)
    summaries = slow(NEVER, summarizer(100))  # the turn goes on with coarse lines at the bound
    fake = AnthropicFake(Script(answer("Both noted.")).route(is_compaction, summaries))
    app = ChatApp(home)
    async with hosting(app, small_window(home, fake)), app.run_test(size=SIZE) as pilot:
        await enter_line(pilot, "what do you remember?")
        await wait_until(pilot, lambda: any(n.startswith("catching up: ") for n in notes(app)))
        row = next(n for n in notes(app) if n.startswith("catching up: "))
        assert PROGRESS.fullmatch(row), row
        await enter_line(pilot, "and the rotation?")
        await wait_until(pilot, lambda: replies(app) == ["Both noted."], timeout=30)
        assert not any(n.startswith("catching up") for n in notes(app))
        memory = [n for n in notes(app) if n.startswith("memory: ")]
        assert len(memory) == 1 and "only as coarse lines, which zoom opens" in memory[0]
    assert log_of(home)[MESSAGES:] == [
        ("user", "what do you remember?"),
        ("user", "and the rotation?"),
        ("ever", "Both noted."),
    ]
