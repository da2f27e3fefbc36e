"""The app's words as a daily user reads them: counts agree with their nouns, a message past
the end of the chat is named by what the chat holds, `settings applied` shows once per real
change, and an undo's result shows before the note that tells Ever."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from pathlib import Path

import pytest
from textual.widget import Widget
from tui_support import (
    app_of,
    enter_line,
    log_of,
    outputs,
    run_command,
    running,
    script,
    wait_until,
    write_config,
)

from evertalk.tui.setup import SetupScreen
from evertalk.tui.undo import UndoScreen
from evertalk.tui.widgets import NoteRow, OutputRow, ReplyView
from fakes import AnthropicFake, ToolCall, reply
from fakes import chat as answer

pytestmark = pytest.mark.anyio


def shown_more(rows: Callable[[], list[Widget]], count: int) -> bool:
    return len(rows()) == count


def notes(pilot: object) -> list[str]:
    return [row.text for row in app_of(pilot).query(NoteRow)]


def applied_rows(pilot: object) -> int:
    return sum(text.startswith("settings applied") for text in notes(pilot))


async def test_forget_counts_agree_and_past_the_end_says_what_the_chat_holds(
    home: Path,
) -> None:
    fake = AnthropicFake(script().push(answer("Hi.")))
    async with running(home, fake) as pilot:
        app = app_of(pilot)
        said = await run_command(pilot, "/forget 0")  # an empty chat
        assert said == "forget: the chat has no messages yet"
        await enter_line(pilot, "hello")
        await wait_until(pilot, lambda: len(log_of(home)) == 2 and not app.busy)
        assert await run_command(pilot, "/forget 62") == "forget: the chat has 2 messages, 0–1"
        assert await run_command(pilot, "/forget 1-62") == "forget: the chat has 2 messages, 0–1"
        await enter_line(pilot, "/forget 0")
        await wait_until(pilot, lambda: any(o.startswith("Type `") for o in outputs(app)))
        preview = outputs(app)
        assert not [line for line in preview if line.startswith("Search index")]  # search off
        assert not [line for line in preview if "about 0 " in line or "about 1 " in line]
        done = await run_command(pilot, "/forget 0 yes")
        assert done.startswith("Forgotten: 1 message; ")


async def test_settings_applied_shows_once_per_real_change(home: Path) -> None:
    fake = AnthropicFake(script().push(answer("Hi."), answer("Again.")))
    async with running(home, fake) as pilot:
        app = app_of(pilot)
        await enter_line(pilot, "hello")
        await wait_until(pilot, lambda: len(log_of(home)) == 2 and not app.busy)
        await run_command(pilot, "/forget 0 yes")  # the service reopens the chat
        await enter_line(pilot, "/setup")
        await wait_until(pilot, lambda: isinstance(app.screen, SetupScreen))
        await pilot.press("ctrl+s")  # saved as they were: said once all the same
        await wait_until(pilot, lambda: applied_rows(pilot) == 1)
        await run_command(pilot, "/forget 1 yes")
        # a turn runs only once the chat is open again: any `reopened` is shown by then
        await enter_line(pilot, "and now?")
        await wait_until(pilot, lambda: [v.source for v in app.query(ReplyView)][-1:] == ["Again."])
        assert applied_rows(pilot) == 1


async def test_an_undo_shows_its_result_then_the_note(tmp_path: Path) -> None:
    home = tmp_path / "home"
    write_config(home, write="allow")
    calls = reply(ToolCall("write", {"path": "todo.txt", "content": "buy bread\n"}))
    fake = AnthropicFake(script().push(calls, answer("Written."), calls, answer("Again.")))
    async with running(home, fake) as pilot:
        app = app_of(pilot)

        def undone() -> list[Widget]:
            """The result rows and the notes of the undos, in the order they show."""
            return [
                row
                for row in app.chat_log.children
                if (isinstance(row, OutputRow) and row.text.startswith("Undid turn"))
                or (isinstance(row, NoteRow) and row.text.startswith("note from"))
            ]

        for turn in ("write it", "write it again"):
            await enter_line(pilot, turn)
            await wait_until(pilot, lambda: log_of(home)[-1][0] == "ever" and not app.busy)
            count = len(undone())
            await enter_line(pilot, "/undo")
            await wait_until(pilot, lambda: isinstance(app.screen, UndoScreen))
            await pilot.press("y")
            await wait_until(pilot, partial(shown_more, undone, count + 2))
        kinds = [type(row) for row in undone()]
        assert kinds == [OutputRow, NoteRow, OutputRow, NoteRow]
