"""A tool row's ✓ and ✗ tell the truth: a shell command that exits non-zero, or a call that
failed, shows ✗ as it happens and, once the app opens again, in the row rebuilt from the log
(its `echo` is marked `failed`); one that worked shows ✓ both times."""

from __future__ import annotations

from pathlib import Path

import pytest
from tui_support import agent_of, app_of, enter_line, running, script, wait_until, write_config

from evertalk.client.remote import Message
from evertalk.tui.app import ChatApp
from evertalk.tui.history import earlier_rows
from evertalk.tui.widgets import ReplyView, ToolRow
from fakes import AnthropicFake, ToolCall, reply
from fakes import chat as answer

pytestmark = pytest.mark.anyio

EXPECTED = [
    ("✓ shell  echo fine", False),
    ("✗ shell  echo broken; exit 1  — [exit status 1]", True),
    # only the mark tells this one failed once the app reads it back from the log
    ("✗ read  missing.txt  — missing.txt: no such file", True),
]


def tool_rows(app: ChatApp) -> list[tuple[str, bool]]:
    return [(row.heading, row.is_error) for row in app.query(ToolRow)]


async def test_a_command_that_exits_non_zero_shows_failed_live_and_after_a_restart(
    tmp_path: Path,
) -> None:
    home = tmp_path / "home"
    write_config(home, shell="allow")
    calls = reply(
        ToolCall("shell", {"command": "echo fine"}),
        ToolCall("shell", {"command": "echo broken; exit 1"}),
        ToolCall("read", {"path": "missing.txt"}),
    )
    fake = AnthropicFake(script().push(calls, answer("One of them failed.")))
    async with running(home, fake) as pilot:
        app = app_of(pilot)
        await enter_line(pilot, "run both")
        await wait_until(
            pilot,
            lambda: (
                not agent_of(app).busy
                and [view.source for view in app.query(ReplyView)][-1:] == ["One of them failed."]
            ),
        )
        assert tool_rows(app) == EXPECTED
        assert "broken" in list(app.query(ToolRow))[1].output_text
    async with running(home, AnthropicFake(script())) as pilot:
        app = app_of(pilot)
        await wait_until(pilot, lambda: len(app.query(ToolRow)) == 3)
        assert tool_rows(app) == EXPECTED


def test_an_older_log_without_the_mark_is_read_by_its_words() -> None:
    """Echoes logged before the mark existed: a shell status other than 0 (or a kill, a
    timeout) still reads as failed; a mark is believed whatever the words."""
    log = [
        Message(0, "tool", 'shell {"command":"false"}'),
        Message(1, "echo", "shell: [exit status 1]"),
        Message(2, "tool", 'shell {"command":"sleep 9"}'),
        Message(3, "echo", "shell: [timed out after 2 s]"),
        Message(4, "tool", 'shell {"command":"true"}'),
        Message(5, "echo", "shell: [exit status 0]"),
        Message(6, "tool", 'read {"path":"x"}'),
        Message(7, "echo", "read: x: no such file", failed=True),
    ]
    rows = earlier_rows(log)
    assert [row.is_error for row in rows if isinstance(row, ToolRow)] == [True, True, False, True]
