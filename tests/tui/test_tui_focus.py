"""Keys typed while a row of the chat has the focus (Shift+Tab took it there) go back to the
input: the focus returns to it and the key is typed in it, so that nothing typed is lost."""

from __future__ import annotations

from pathlib import Path

import pytest
from tui_support import agent_of, app_of, enter_line, running, script, type_text, wait_until
from tui_support import write_config as configure

from evertalk.tui.widgets import PromptInput, ReplyView, ToolRow
from fakes import AnthropicFake, ToolCall, reply
from fakes import chat as answer

pytestmark = pytest.mark.anyio


async def test_typing_on_an_opened_tool_row_goes_to_the_input(tmp_path: Path) -> None:
    home = tmp_path / "home"
    configure(home, shell="allow")
    turn = reply(ToolCall("shell", {"command": "echo fine"}))
    fake = AnthropicFake(script().push(turn, answer("It said fine.")))
    async with running(home, fake) as pilot:
        app = app_of(pilot)
        prompt = app.query_one(PromptInput)
        await enter_line(pilot, "run it")
        await wait_until(
            pilot, lambda: not agent_of(app).busy and bool(app.query(ReplyView)) and not app.busy
        )
        await pilot.press("shift+tab", "enter")  # the tool row opens
        row = app.query_one(ToolRow)
        assert not row.collapsed
        assert app.focused is not prompt
        await type_text(pilot, "Hi there")
        assert app.focused is prompt
        assert prompt.text == "Hi there"
        assert not row.collapsed  # the keys did nothing else
