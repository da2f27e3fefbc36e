"""`evertalk undo [TURN]`: put back the files the last turn (or turn TURN) changed with `write` and
`edit`, after showing them and a diff from each file as it is to the file restored, and asking
(`--yes` for scripts). A file that changed since the turn wrote it is refused by name and left as
it is; the others are restored. What shell commands changed is not tracked.

The service keeps the checkpoints and logs the note that tells Ever what was undone, so this
command goes through it (started if none runs). Exit status: 0 when every file was restored, 1
when one was refused, nothing was to be done, or the answer was no.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evertalk.terminal_text import confirmed, escape_controls, fail

if TYPE_CHECKING:
    from evertalk.client.connection import Connection


def add_parser(commands: Any) -> None:
    """`undo` among evertalk's commands (`commands`: the subparsers of `cli.build_parser`)."""
    undo = commands.add_parser(
        "undo", help="restore the files the last turn (or turn TURN) changed with write and edit"
    )
    undo.add_argument("turn", nargs="?", type=int, metavar="TURN", help="the turn's number")
    undo.add_argument("--yes", action="store_true", help="restore without asking first")


def run_undo(args: argparse.Namespace, home: Path) -> int:
    from evertalk.client.connection import ServiceError, connect

    try:
        with connect(home, "undo", start=True, say=_warn) as connection:
            return _undo(connection, args.turn, yes=args.yes)
    except ServiceError as error:
        return fail(str(error))


def _undo(connection: Connection, turn: int | None, *, yes: bool) -> int:
    from evertalk.protocol.replies import Undone, UndoPreview
    from evertalk.protocol.requests import Undo

    preview = connection.request(Undo(turn=turn, preview=True), UndoPreview)
    for line in preview.lines:
        _say(line)
    if not preview.changes:
        _say("Nothing to restore.")
        return 1
    if not yes and not confirmed("Restore these files?"):
        _say("Nothing was changed.")
        return 1
    done = connection.request(Undo(turn=preview.turn), Undone)
    for line in done.lines:
        _say(line)
    return 1 if done.refused else 0


def _say(text: str) -> None:
    print(escape_controls(text))


def _warn(text: str) -> None:
    print(escape_controls(text), file=sys.stderr)
