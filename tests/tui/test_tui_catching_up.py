"""The terminal app on a chat that is behind: while the turn waits for the chat to catch up, a
row says how far it is (`catching up: 12 summaries to go, …`); a message sent meanwhile joins
the turn; the row goes when the turn starts, and a `memory:` row says when the turn went on
with coarse lines."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from tui_support import (
    enter_line,
    fake_opener,
    is_compaction,
    log_of,
    running,
    wait_until,
    write_config,
)

from evertalk.agent.turn import Limits
from evertalk.chat import Chat
from evertalk.memory.text import LINE_LIMIT
from evertalk.service.server import AgentOpener
from evertalk.tui.app import ChatApp
from evertalk.tui.widgets import NoteRow, ReplyView
from fakes import AnthropicFake, Script, sized_line, slow, summarizer
from fakes import chat as answer

pytestmark = pytest.mark.anyio

MESSAGES = 64  # free leaves of 512 bytes: a view of 33 KB, whole text, that nothing merged yet
WINDOW = Limits(max_tokens=1_000, context_budget=12_000)  # room for about 26 KB of view
CATCH_UP_TIMEOUT = 3.0  # seconds the row stays up: summaries never come here
NEVER = 3600.0
PROGRESS = re.compile(
    r"catching up: [\d,]+ summar(y|ies) to go, estimating…; turns send about [\d,K]+ tokens "
    r"of view meanwhile \(Enter starts the turn now; Ctrl\+C cancels it\)"
)


def behind(home: Path) -> None:
    write_config(home)
    with Chat.open(home / "chat") as chat:
        for i in range(MESSAGES):
            chat.append("user", sized_line(f"note {i} on the backups", LINE_LIMIT - len("user: ")))


def small_window(home: Path, fake: AnthropicFake) -> AgentOpener:
    """The service's agent on the fake, with a small context window."""
    return fake_opener(home, fake, limits=WINDOW, catch_up_timeout=CATCH_UP_TIMEOUT)


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
    async with running(home, fake, opener=small_window(home, fake)) as pilot:
        app = pilot.app
        assert isinstance(app, ChatApp)
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


async def test_enter_on_an_empty_input_starts_the_waiting_turn_at_once(tmp_path: Path) -> None:
    home = tmp_path / "home"
    behind(home)
    summaries = slow(NEVER, summarizer(100))
    fake = AnthropicFake(Script(answer("From what is built.")).route(is_compaction, summaries))
    async with running(home, fake, opener=small_window(home, fake)) as pilot:
        app = pilot.app
        assert isinstance(app, ChatApp)
        await enter_line(pilot, "what do you remember?")
        await wait_until(pilot, lambda: any(n.startswith("catching up: ") for n in notes(app)))
        await pilot.press("enter")  # nothing typed: start now
        await wait_until(pilot, lambda: replies(app) == ["From what is built."], timeout=30)
        memory = [n for n in notes(app) if n.startswith("memory: ")]
        assert len(memory) == 1 and "you asked to start without catching up" in memory[0]
    assert log_of(home)[MESSAGES:] == [
        ("user", "what do you remember?"),
        ("ever", "From what is built."),
    ]
