"""The permission dialog of an MCP server's tool (issue 25 §1): it names the server and shows
the arguments, and "always" lets the tool's next call run unasked."""

from __future__ import annotations

from pathlib import Path

import pytest
from test_tui_permission_keys import next_dialog, text_of
from tui_support import agent_of, app_of, enter_line, running, script, wait_until

from evertalk.tui.widgets import ReplyView, ToolRow
from fakes import AnthropicFake, ToolCall, reply
from fakes import chat as answer
from mcp_servers import add_servers, flaky_entry

pytestmark = pytest.mark.anyio


async def test_the_dialog_names_the_server_and_shows_the_arguments(home: Path) -> None:
    add_servers(home, flaky_entry())
    calls = [ToolCall("flaky__echo", {"text": "first"}), ToolCall("flaky__echo", {"text": "again"})]
    fake = AnthropicFake(script().push(reply(*calls), answer("Both echoed.")))
    async with running(home, fake) as pilot:
        app = app_of(pilot)
        await enter_line(pilot, "echo twice")
        dialog = await next_dialog(pilot)
        assert text_of(dialog, "#question") == "Ever wants to call echo of the MCP server flaky"
        assert text_of(dialog, "#call") == '{\n  "text": "first"\n}'
        await pilot.press("a")  # always this tool: the second call is not asked about
        await wait_until(
            pilot,
            lambda: (
                not agent_of(app).busy
                and [view.source for view in app.query(ReplyView)][-1:] == ["Both echoed."]
            ),
            timeout=30,
        )
        rows = [(row.summary, row.is_error) for row in app.query(ToolRow)]
    assert rows == [("text=first", False), ("text=again", False)]
