"""`/undo [TURN]` in the app: the service shows which files the last turn (or turn TURN) changed
with `write` and `edit` and a diff from each as it is to it restored; a dialog asks, and on yes
the service restores them and tells Ever with a note. The dialog says that what shell commands
changed is not tracked. Keeping the files is the default (Enter, Esc, `n`)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

from textual.app import App, ComposeResult
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Button, Label, Static

from evertalk.client.remote import Remote, ServiceError
from evertalk.protocol.replies import Undone, UndoPreview
from evertalk.protocol.requests import Undo
from evertalk.slash import UNDO, CommandError
from evertalk.terminal_text import escape_controls
from evertalk.tui.widgets import OutputRow
from evertalk.tui.yes_no import YesNoScreen

Show = Callable[[str], Awaitable[OutputRow]]
"""How the app shows a command's output: one row, which it returns."""


class UndoScreen(YesNoScreen):
    """The preview of an undo; dismissed with True to restore the files."""

    DEFAULT_CSS = """
    UndoScreen { align: center middle; }
    UndoScreen > Vertical {
        width: 90%;
        height: 80%;
        border: round $warning;
        padding: 1 2;
        background: $surface;
    }
    UndoScreen VerticalScroll { height: 1fr; }
    UndoScreen Horizontal { height: auto; margin-top: 1; }
    UndoScreen Button { margin-right: 2; }
    """
    YES = "restore"

    def __init__(self, lines: list[str]) -> None:
        super().__init__()
        self.lines = lines

    def compose(self) -> ComposeResult:
        with Vertical():
            with VerticalScroll():
                yield Static(escape_controls("\n".join(self.lines)), markup=False, id="undo-plan")
            yield Label("Restore these files?")
            with Horizontal():
                yield Button("Keep them (n)", id="keep", variant="primary")
                yield Button("Restore (y)", id="restore", variant="warning")


def turn_of(args: tuple[str, ...]) -> int | None:
    """The turn `/undo` names, None for the last one."""
    if not args:
        return None
    if len(args) == 1 and args[0].isdigit():
        return int(args[0])
    raise CommandError(f"usage: {UNDO.usage}")


async def undo_in_app(app: App[Any], remote: Remote, args: tuple[str, ...], show: Show) -> None:
    """Ask the service for the preview, show it in the dialog, restore on yes."""
    turn = turn_of(args)
    try:
        preview = await remote.request(Undo(turn=turn, preview=True), UndoPreview)
    except ServiceError as error:
        raise CommandError(str(error)) from None
    lines = list(preview.lines)
    if not preview.changes:
        await show("\n".join([*lines, "Nothing to restore."]))
        return

    async def answered(restore: bool | None) -> None:
        if not restore:
            await show("Nothing was changed.")
            return
        # the row first, its words once they come: the note that tells Ever, which the
        # service may send before its answer, then shows below the result
        row = await show("restoring the files…")
        try:
            done = await remote.request(Undo(turn=preview.turn), Undone)
        except ServiceError as error:
            row.set_text(f"undo: {error}")
            return
        row.set_text("\n".join(done.lines))

    app.push_screen(UndoScreen(lines), callback=answered)
