"""Small things a new user meets in the window: `/help` opens at its top, and a row of messages
another program logged names that program, not its process id."""

from __future__ import annotations

from pathlib import Path

import pytest
from tui_support import app_of, running, script, wait_until
from tui_support import enter_line as send_line

from evertalk.protocol.events import Recorded
from evertalk.protocol.replies import Reopened
from evertalk.tui.app import applied
from evertalk.tui.turn_rows import recorded_text
from evertalk.tui.widgets import OutputRow
from fakes import AnthropicFake

pytestmark = pytest.mark.anyio


async def test_help_opens_at_its_top(home: Path) -> None:
    async with running(home, AnthropicFake(script()), size=(100, 20)) as pilot:
        app = app_of(pilot)
        await send_line(pilot, "/help")
        await wait_until(pilot, lambda: app.query(OutputRow))
        row = app.query(OutputRow).last()
        await pilot.pause()
        log = app.chat_log
        assert row.outer_size.height > log.size.height  # taller than the log: it scrolls
        # its first line shows at the top of the log, not its last at the bottom
        await wait_until(
            pilot, lambda: 0 <= row.virtual_region.y - log.scroll_offset.y < log.size.height // 2
        )
        assert log.scroll_offset.y < log.max_scroll_y


def test_a_row_of_logged_messages_names_the_program_without_its_process_id() -> None:
    assert recorded_text(Recorded("import 16545", 1_200)) == "1,200 messages logged by import"
    assert recorded_text(Recorded("import 16545", 1)) == "1 message logged by import"
    note = Recorded("mcp 4242", 1, kind="note", text="deploy done")
    assert recorded_text(note) == "note from mcp: deploy done"
    assert recorded_text(Recorded("build-bot", 2)) == "2 messages logged by build-bot"


def test_setup_says_a_key_variable_wins_only_over_a_key_the_file_has(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    frame = Reopened(provider="anthropic", model="claude-sonnet-5-5", base_url=None)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-from-the-environment-0123")
    assert applied(frame, file_key=False) == "settings applied: anthropic, model claude-sonnet-5-5"
    assert applied(frame, file_key=True).endswith(
        "(ANTHROPIC_API_KEY is set: its key is used, not the one in config.toml)"
    )
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    assert "is set" not in applied(frame, file_key=True)
