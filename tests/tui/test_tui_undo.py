"""`/undo` in the app: a turn writes files; the dialog shows them with a diff and says that
shell commands are not tracked; `n` keeps them, `y` restores them, and Ever gets a note."""

from __future__ import annotations

from pathlib import Path

import pytest
from tui_support import (
    app_of,
    enter_line,
    log_of,
    running,
    script,
    wait_until,
    workdir_of,
    write_config,
)

from evertalk.tui.undo import UndoScreen
from evertalk.tui.widgets import OutputRow
from fakes import AnthropicFake, ToolCall, reply
from fakes import chat as answer

pytestmark = pytest.mark.anyio


async def test_undo_shows_the_files_and_restores_them_on_yes(tmp_path: Path) -> None:
    home = tmp_path / "home"
    write_config(home, write="allow", edit="allow")
    work = workdir_of(home)
    (work / "notes.md").write_text("milk\n")
    calls = reply(
        ToolCall("edit", {"path": "notes.md", "old": "milk", "new": "bread"}),
        ToolCall("write", {"path": "todo.txt", "content": "buy bread\n"}),
    )
    fake = AnthropicFake(script().push(calls, answer("Changed.")))
    async with running(home, fake) as pilot:
        app = app_of(pilot)
        await enter_line(pilot, "change my notes")
        await wait_until(pilot, lambda: len(log_of(home)) >= 4 and not app.busy)
        assert (work / "notes.md").read_text() == "bread\n"
        outputs = lambda: [row.text for row in app.query(OutputRow)]  # noqa: E731

        await enter_line(pilot, "/undo")
        await wait_until(pilot, lambda: isinstance(app.screen, UndoScreen))
        shown = str(app.screen.query_one("#undo-plan").render())
        assert "restore notes.md" in shown and "remove  todo.txt" in shown
        assert "-bread\n+milk" in shown
        assert "shell commands are not tracked" in shown
        await pilot.press("n")  # the default: nothing changes
        await wait_until(pilot, lambda: "Nothing was changed." in outputs())
        assert (work / "todo.txt").exists()

        await enter_line(pilot, "/undo")
        await wait_until(pilot, lambda: isinstance(app.screen, UndoScreen))
        await pilot.press("y")
        await wait_until(pilot, lambda: any(o.startswith("Undid turn") for o in outputs()))
        assert (work / "notes.md").read_text() == "milk\n"
        assert not (work / "todo.txt").exists()
        notes = [text for kind, text in log_of(home) if kind == "note"]
        assert len(notes) == 1 and "notes.md" in notes[0] and "todo.txt" in notes[0]

        await enter_line(pilot, "/undo")
        await wait_until(pilot, lambda: any("nothing to undo" in o for o in outputs()))
