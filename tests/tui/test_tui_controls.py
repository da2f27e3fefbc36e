"""Control characters in what the app shows (a message, a reply, a thought, a tool's input and
output, the permission dialog, /memory) reach the screen escaped, never raw; the log keeps them
as they were. What reaches the screen is read from Textual's screenshot of it, which holds the
text of every cell as the terminal would be sent it."""

from __future__ import annotations

import html
import json
import re
from pathlib import Path

import pytest
from textual.pilot import Pilot
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

from evertalk.tui.widgets import OutputRow, PermissionScreen, ReplyView, ToolRow
from fakes import AnthropicFake, ToolCall, reply
from fakes import chat as answer

pytestmark = pytest.mark.anyio

# It would clear the screen, retitle the window and (C1 CSI 6n) make the terminal type an answer.
HOSTILE = "clear\x1b[2J\x1b]0;pwned\x07 and \x9b6n"
SHOWN = "clear\\x1b[2J\\x1b]0;pwned\\x07 and \\x9b6n"
RAW_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


def screen_text(pilot: Pilot[int]) -> str:
    """The characters on the screen (every line, the dialog over the chat included)."""
    svg = pilot.app.export_screenshot()
    cells = re.findall(r"<text [^>]*>([^<]*)</text>", svg)
    return html.unescape("".join(cells)).replace("\xa0", " ")


def assert_escaped(pilot: Pilot[int], *where: str) -> None:
    shown = screen_text(pilot)
    assert not RAW_CONTROLS.search(shown), shown
    for part in where:
        assert part in shown, (part, shown)


async def test_control_characters_show_escaped_and_are_logged_as_sent(tmp_path: Path) -> None:
    home = tmp_path / "home"
    write_config(home)  # shell asks: the dialog shows the command
    command = f"echo '{HOSTILE}'"
    fake = AnthropicFake(
        script().push(
            reply(f"Running {HOSTILE}", ToolCall("shell", {"command": command})),
            reply(ToolCall("zoom", {"id": 0, "n": 1})),  # its output: the first message, raw
            answer(f"It says {HOSTILE}", thinking=f"so {HOSTILE}"),
        )
    )
    async with running(home, fake) as pilot:
        app = app_of(pilot)
        await enter_line(pilot, f"try {HOSTILE}")
        await wait_until(pilot, lambda: isinstance(app.screen, PermissionScreen))
        dialog = app.screen
        assert isinstance(dialog, PermissionScreen)
        assert_escaped(pilot, f"$ echo '{SHOWN}'")  # the dialog hides the chat behind it
        await wait_until(pilot, lambda: dialog.answerable)
        await pilot.press("enter")  # Deny: what the dialog showed is what counts here
        await wait_until(pilot, lambda: not agent_of(app).busy and len(app.query(ReplyView)) == 2)
        shell, zoom = app.query(ToolRow)
        assert HOSTILE in zoom.output_text  # the row keeps what the tool said
        shell.collapsed = zoom.collapsed = False
        await pilot.pause()
        assert_escaped(pilot, f"try {SHOWN}", f"Running {SHOWN}", f"✗ shell  echo '{SHOWN}'")
        assert_escaped(pilot, f"$ echo '{SHOWN}'", f"0+1|user: try {SHOWN}")
        assert_escaped(pilot, f"so {SHOWN}", f"It says {SHOWN}")

        await enter_line(pilot, "/memory")
        await wait_until(pilot, lambda: len(app.query(OutputRow)) == 2)
        await enter_line(pilot, "/memory zoom 0 1")
        await wait_until(pilot, lambda: len(app.query(OutputRow)) == 3)
        assert app.query(OutputRow).last().text == f"0+1|user: try {HOSTILE}"
        assert_escaped(pilot, f"0+1|user: try {SHOWN}")
    log = log_of(home)
    assert log[:2] == [("user", f"try {HOSTILE}"), ("ever", f"Running {HOSTILE}")]
    assert log[2][0] == "tool"
    assert json.loads(log[2][1].removeprefix("shell ")) == {"command": command}
    assert [kind for kind, _ in log[3:]] == ["echo", "tool", "echo", "ever"]
    assert HOSTILE in log[5][1]
    assert log[6] == ("ever", f"It says {HOSTILE}")


async def test_the_rows_of_an_earlier_session_show_them_escaped(tmp_path: Path) -> None:
    home = tmp_path / "home"
    write_config(home)
    fake = AnthropicFake(script().push(answer(f"Seen {HOSTILE}")))
    async with running(home, fake) as pilot:
        app = app_of(pilot)
        await enter_line(pilot, f"first {HOSTILE}")
        await wait_until(pilot, lambda: not agent_of(app).busy and app.query(ReplyView))
    async with running(home, fake) as pilot:
        assert_escaped(pilot, f"first {SHOWN}", f"Seen {SHOWN}")


async def test_an_attached_file_shows_under_its_own_name(tmp_path: Path) -> None:
    home = tmp_path / "home"
    write_config(home)
    picture = tmp_path / "[b]shot\x1b[2J.png"  # markup and an escape sequence, in a file name
    picture.write_bytes(b"\x89PNG\r\n\x1a\n" + b"\x02" * 30)
    async with running(home, AnthropicFake(script())) as pilot:
        app = app_of(pilot)
        await enter_line(pilot, f"/image {picture}")
        await wait_until(pilot, lambda: app.prompt.border_title is not None)
        await pilot.pause()
        assert_escaped(pilot, "1 image attached: [b]shot\\x1b[2J.png")
