"""The input as a daily user types in it (issue 15, item 1): Ctrl+C and Esc clear it (Ctrl+C
cancels a running turn first), Ctrl+U deletes back to the start of the line as typed, and a
big paste goes whole to Ever but shows folded in the chat, with a note when the log keeps it
as several messages."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual import events
from tui_support import agent_of, app_of, enter_line, log_of, running, script, type_text, wait_until
from tui_support import write_config as configure

from evertalk.memory.text import MESSAGE_LIMIT
from evertalk.tui import commands
from evertalk.tui.app import ChatApp
from evertalk.tui.widgets import NoteRow, PromptInput, ReplyView, UserRow
from fakes import AnthropicFake, slow
from fakes import chat as answer

pytestmark = pytest.mark.anyio

# 650 lines, 50,049 bytes: as a log or a source file pasted whole
BIG = "\n".join(f"{number:04d} " + "x" * 71 for number in range(650))


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    configure(home)
    return home


def notes(app: ChatApp) -> list[str]:
    return [row.text for row in app.query(NoteRow)]


async def test_ctrl_c_clears_an_idle_input_and_cancels_a_turn_first(home: Path) -> None:
    fake = AnthropicFake(script().push(slow(0.1, answer("word " * 400), chunk_delay=0.2)))
    async with running(home, fake) as pilot:
        app = app_of(pilot)
        prompt = app.query_one(PromptInput)
        await enter_line(pilot, "a long story, please")
        await wait_until(pilot, lambda: app.busy and bool(app.query(ReplyView)))
        await type_text(pilot, "next question")
        await pilot.press("ctrl+c")  # the turn goes, what is typed stays
        await wait_until(pilot, lambda: any(n.startswith("cancelled") for n in notes(app)))
        assert prompt.text == "next question"
        await wait_until(pilot, lambda: not app.busy)
        await pilot.press("ctrl+c")  # nothing runs: the input is cleared
        assert prompt.text == ""
        await pilot.press("ctrl+z")  # and comes back
        assert prompt.text == "next question"
        assert app.is_running


async def test_esc_clears_the_input_and_ctrl_u_deletes_to_the_lines_start(home: Path) -> None:
    async with running(home, AnthropicFake(script())) as pilot:
        app = app_of(pilot)
        prompt = app.query_one(PromptInput)
        await type_text(pilot, "a draft\nof two lines")
        await pilot.press("escape")
        assert prompt.text == ""
        await pilot.press("escape")  # on an empty input: nothing happens
        assert prompt.text == "" and app.is_running
        # a line far wider than the input: it wraps to several rows on the screen
        long_line = " ".join(f"word{number}" for number in range(60))
        prompt.load_text("first line\n" + long_line)
        prompt.move_cursor(prompt.document.end)
        await pilot.pause()
        assert prompt.wrapped_document.height > 3
        await pilot.press("ctrl+u")  # the whole line typed, as a shell deletes it
        assert prompt.text == "first line\n"
        await pilot.press("ctrl+u")  # at a line's start: joined to the line before
        assert prompt.text == "first line"
        prompt.move_cursor((0, 5))
        await pilot.press("ctrl+u")
        assert prompt.text == " line"


async def test_a_big_paste_goes_whole_and_shows_folded_until_clicked(home: Path) -> None:
    fake = AnthropicFake(script().push(answer("Seen it.")))
    message = "what is wrong here?\n" + BIG
    assert len(message) > MESSAGE_LIMIT
    async with running(home, fake) as pilot:
        app = app_of(pilot)
        prompt = app.query_one(PromptInput)
        await type_text(pilot, "what is wrong here?\n")
        app.post_message(events.Paste(BIG))  # as the terminal sends it: to the app
        await wait_until(pilot, lambda: prompt.text == message)
        # the input keeps it whole (it can be read and edited); its title says what it is
        assert prompt.border_title == "pasted 50 KB, 650 lines · logged as 2 messages"
        await pilot.press("enter")
        assert prompt.border_title is None
        await wait_until(pilot, lambda: not agent_of(app).busy and app.query(ReplyView))
        row = app.query_one(UserRow)
        assert row.text == message
        assert row.shown == "what is wrong here?\n[pasted 50 KB, 650 lines]"
        assert row.region.height <= 4  # two lines, and the row's margins
        said = (
            f"a long message: the log keeps it as 2 messages of at most {MESSAGE_LIMIT:,} "
            "characters, in order (the chat shows it whole)"
        )
        assert said in notes(app)
        await pilot.click(UserRow)
        assert row.shown == message
        await pilot.pause()
        assert row.region.height > 600
        app.chat_log.scroll_to_widget(row, animate=False, top=True)
        await pilot.pause()
        await pilot.click(UserRow, offset=(4, 0))  # its first line: the rest is off the screen
        assert row.shown.endswith("[pasted 50 KB, 650 lines]")
    log = log_of(home)
    assert [kind for kind, _ in log] == ["user", "user", "ever"]
    assert log[0][1] + log[1][1] == message  # sent whole, kept in two pages


async def test_a_long_message_from_elsewhere_shows_its_start_folded(home: Path) -> None:
    fake = AnthropicFake(script().push(answer("Long indeed.")))
    async with running(home, fake) as pilot:
        app = app_of(pilot)
        await enter_line(pilot, BIG)  # not pasted here: as another window's would come
        await wait_until(pilot, lambda: not agent_of(app).busy and app.query(ReplyView))
        row = app.query_one(UserRow)
        head = "\n".join(BIG.splitlines()[:3])
        assert row.shown == head + "\n[long message: 50 KB, 650 lines in all]"
        row.focus()  # as Shift+Tab reaches it
        await pilot.press("enter")
        assert row.shown == BIG
    async with running(home, fake) as pilot:  # and so it shows when the app opens again
        row = app_of(pilot).query_one(UserRow)
        assert row.text == BIG and row.shown.endswith("[long message: 50 KB, 650 lines in all]")


def test_the_help_says_a_long_message_is_logged_as_several() -> None:
    text = commands.help_text()
    assert f"{MESSAGE_LIMIT:,} characters" in text and "folded" in text
    for key in ("Esc", "Ctrl+U", "Ctrl+C", "Ctrl+D"):
        assert key in text
