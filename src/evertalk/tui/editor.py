"""`/instructions`: the user's instructions file opened in their editor, the app suspended."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

from textual.app import App, SuspendNotSupported

from evertalk.tui import commands
from evertalk.tui.commands import CommandError

Editor = Callable[[Path], None]


def cannot_edit(editor: str, why: str) -> str:
    return f"cannot run the editor {editor!r}: {why} (set $VISUAL or $EDITOR)"


def editor_command(editor: str) -> list[str]:
    """The words of $VISUAL or $EDITOR, checked before the app suspends: a CommandError when
    they cannot be split or name no program on the PATH."""
    try:
        argv = shlex.split(editor)
    except ValueError as error:
        raise CommandError(cannot_edit(editor, str(error))) from None
    if not argv:
        raise CommandError(cannot_edit(editor, "it is empty"))
    if shutil.which(argv[0]) is None:
        raise CommandError(cannot_edit(editor, f"{argv[0]} is not found"))
    return argv


def edit_instructions(app: App[int], home: Path, editor_call: Editor | None) -> str:
    """Open `<home>/instructions.md` in the editor (`editor_call`, or $VISUAL or $EDITOR with
    the app suspended meanwhile); what to tell the user after."""

    try:
        path = commands.instructions_file(home)
    except OSError as error:
        raise CommandError(f"cannot create the instructions file: {error}") from None
    after = (
        f"{path}: your instructions take effect at the next start (they stay the same "
        "for a whole session, so that the model's prompt cache keeps working)"
    )
    if editor_call is not None:
        editor_call(path)
        return after
    editor = os.environ.get("VISUAL") or os.environ.get("EDITOR") or "vi"
    argv = editor_command(editor)
    failure: str | None = None
    try:
        with app.suspend():
            # nothing may raise in here: the app comes back only when the block ends
            # normally (Textual resumes after the `yield`, not in a `finally`)
            try:
                subprocess.run([*argv, str(path)], check=False)
            except Exception as error:  # whatever it is, the app must come back first
                failure = str(error) or type(error).__name__
    except SuspendNotSupported:
        raise CommandError(f"cannot open an editor here: edit {path} yourself") from None
    if failure is not None:
        raise CommandError(cannot_edit(editor, failure))
    return after
