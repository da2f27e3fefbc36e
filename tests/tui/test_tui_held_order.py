"""A message sent while a turn runs shows held where it was typed, then moves to where the log
puts it once Ever takes it: the live chat and the chat reopened draw the same rows in the same
order."""

from __future__ import annotations

from pathlib import Path

import pytest
from tui_support import (
    agent_of,
    app_of,
    enter_line,
    log_of,
    running,
    script,
    wait_until,
    write_config,
)

from evertalk.tui.app import ChatApp
from evertalk.tui.widgets import ReplyView, ToolRow, UserRow
from fakes import AnthropicFake, ToolCall, constant, reply, slow
from fakes import chat as answer

pytestmark = pytest.mark.anyio


def drawn(app: ChatApp) -> list[tuple[str, str]]:
    """The user rows and the replies of the chat, (kind, text) as the log names them, in the
    order they are drawn."""
    rows: list[tuple[str, str]] = []
    for row in app.chat_log.children:
        if isinstance(row, UserRow):
            rows.append(("user", row.text))
        elif isinstance(row, ReplyView):
            rows.append(("ever", row.source))
    return rows


def said(home: Path) -> list[tuple[str, str]]:
    """The user messages and the replies of the log, in order."""
    return [(kind, text) for kind, text in log_of(home) if kind in ("user", "ever")]


async def test_a_message_held_for_the_next_turn_moves_after_the_reply(home: Path) -> None:
    fake = AnthropicFake(script().push(slow(2, answer("reply one")), answer("reply two")))
    async with running(home, fake) as pilot:
        app = app_of(pilot)
        await enter_line(pilot, "user one")
        await wait_until(pilot, lambda: agent_of(app).busy)
        await enter_line(pilot, "user two")
        await wait_until(pilot, lambda: len(app.query(UserRow)) == 2)
        assert drawn(app) == [("user", "user one"), ("user", "user two")]  # held, as typed
        await wait_until(
            pilot,
            lambda: not agent_of(app).busy and [text for _, text in drawn(app)][-1] == "reply two",
        )
        expected = [
            ("user", "user one"),
            ("ever", "reply one"),
            ("user", "user two"),
            ("ever", "reply two"),
        ]
        assert said(home) == expected
        assert drawn(app) == expected
        assert not any(row.has_class("held") for row in app.query(UserRow))


async def test_a_message_taken_between_two_steps_moves_after_the_tool_call(tmp_path: Path) -> None:
    home = tmp_path / "home"
    write_config(home, shell="allow")
    fake = AnthropicFake(
        script().push(
            slow(2, constant(reply("Checking.", ToolCall("shell", {"command": "echo checked"})))),
            answer("Done, and noted."),
        )
    )
    async with running(home, fake) as pilot:
        app = app_of(pilot)
        await enter_line(pilot, "check the backups")
        await wait_until(pilot, lambda: agent_of(app).busy)
        await enter_line(pilot, "also the rotation")  # before the tool call: held
        await wait_until(pilot, lambda: len(app.query(UserRow)) == 2)
        await wait_until(
            pilot,
            lambda: not agent_of(app).busy and drawn(app)[-1] == ("ever", "Done, and noted."),
        )
        rows = list(app.chat_log.children)
        tool = next(at for at, row in enumerate(rows) if isinstance(row, ToolRow))
        held = next(
            at for at, row in enumerate(rows) if getattr(row, "text", "") == "also the rotation"
        )
        assert tool < held  # the log has it after the tool's output
        assert drawn(app) == said(home)
