"""Undo what a turn wrote: the files its `write` and `edit` changed go back to what they held
before it (`tools/checkpoints.py`), a file it created is removed.

A file that changed since the turn wrote it (by hand, by a command, by a later turn) is refused
by name and left as it is; the others are still restored, each on its own. Commands the turn
ran with `shell` are not tracked, and whatever they changed stays. Files are read and written
through handles on their folders reached without following links, as the tools write them.
"""

from __future__ import annotations

import contextlib
import difflib
import os
import stat
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Literal

from evertalk.agent.tools import nofollow
from evertalk.agent.tools.checkpoints import Checkpoints, Entry, digest
from evertalk.store.undo_files import DROPPED, UNKEPT

SHELL_NOT_TRACKED: Final = (
    "Changes made by shell commands are not tracked: undo restores only what write and edit "
    "changed."
)
CHANGED: Final = "changed since the turn wrote it"
DIFF_LINES: Final = 400
"""Lines of a file's diff shown at most: the rest is counted."""

Action = Literal["restore", "remove", "refuse", "same"]


class UndoError(Exception):
    """Nothing to undo, or no such turn: one line."""


@dataclass(frozen=True)
class FilePlan:
    """What undo does to one file: restore it, remove it (the turn created it), refuse it
    (`why`), or nothing (it already holds what it held before)."""

    shown: str
    path: Path
    action: Action
    why: str = ""
    diff: tuple[str, ...] = ()
    restored: bytes | None = field(default=None, repr=False)
    current: str | None = None  # the hash of what the file holds now (None: no file)


@dataclass(frozen=True)
class Plan:
    turn: int
    files: tuple[FilePlan, ...]

    @property
    def changes(self) -> list[FilePlan]:
        return [f for f in self.files if f.action in ("restore", "remove")]

    @property
    def refused(self) -> list[FilePlan]:
        return [f for f in self.files if f.action == "refuse"]

    def lines(self, opened_by: str = "") -> list[str]:
        """The preview: the files and what happens to each, then the diffs. `opened_by`: the
        start of the message that opened the turn, to recognize it by."""
        said = f" ({opened_by})" if opened_by else ""
        lines = [f"Undo turn {self.turn}{said}: the files its write and edit calls changed."]
        for f in self.files:
            lines.append(f"  {_verb(f)} {f.shown}" + (f": {f.why}" if f.why else ""))
        for f in self.changes:
            lines += f.diff
        lines.append(SHELL_NOT_TRACKED)
        return lines


@dataclass(frozen=True)
class Done:
    turn: int
    restored: list[str]
    removed: list[str]
    refused: list[str]
    why: dict[str, str] = field(default_factory=dict)
    """Why the plan refused a file, by how it is shown; the others changed since."""

    def note(self) -> str:
        """The note the chat gets, so that Ever knows what the files hold now."""
        parts = [f"The user undid turn {self.turn}'s file changes."]
        if self.restored:
            parts.append("Restored to what they held before it: " + ", ".join(self.restored) + ".")
        if self.removed:
            parts.append("Removed (the turn had created them): " + ", ".join(self.removed) + ".")
        changed = [shown for shown in self.refused if shown not in self.why]
        if changed:
            parts.append(
                "Left as they are (changed since the turn wrote them): " + ", ".join(changed) + "."
            )
        others = [f"{shown} ({self.why[shown]})" for shown in self.refused if shown in self.why]
        if others:
            parts.append("Not restored: " + ", ".join(others) + ".")
        parts.append("Changes made by its shell commands were not undone.")
        return " ".join(parts)

    def lines(self) -> list[str]:
        counts = f"{len(self.restored)} restored, {len(self.removed)} removed"
        out = [f"Undid turn {self.turn}: {counts}."]
        for shown in self.refused:
            why = self.why.get(shown)
            out.append(f"Refused: {shown}: {why}" if why else f"Refused: {shown} {CHANGED}")
        return out


def _verb(f: FilePlan) -> str:
    return {
        "restore": "restore",
        "remove": "remove ",
        "refuse": "REFUSE ",
        "same": "as is  ",
    }[f.action]


def which_turn(checkpoints: Checkpoints, turn: int | None) -> int:
    """The turn to undo: `turn`, else the last one with changes not undone yet."""
    undoable = checkpoints.undoable()
    if turn is None:
        if not undoable:
            raise UndoError("nothing to undo: no turn changed a file with write or edit")
        return undoable[-1]
    if turn in undoable:
        return turn
    if turn in checkpoints.turns():
        raise UndoError(f"turn {turn} was undone already")
    listed = ", ".join(str(t) for t in undoable[-10:]) or "none"
    raise UndoError(f"turn {turn} changed no file that undo can restore (turns: {listed})")


def plan(checkpoints: Checkpoints, turn: int | None = None) -> Plan:
    """What undoing `turn` (else the last) would do, each file read as it is now."""
    chosen = which_turn(checkpoints, turn)
    files = tuple(_plan_file(checkpoints, chosen, e) for e in checkpoints.entries(chosen))
    return Plan(chosen, files)


def apply(checkpoints: Checkpoints, planned: Plan) -> Done:
    """Carry out the plan, each file checked again just before: one that changed since the
    preview is refused too. The turn is marked undone."""
    restored: list[str] = []
    removed: list[str] = []
    refused = [f.shown for f in planned.refused]
    for f in planned.changes:
        try:
            _carry_out(f)
        except (OSError, nofollow.Swapped, _Changed):
            refused.append(f.shown)
            continue
        (removed if f.action == "remove" else restored).append(f.shown)
    why = {f.shown: f.why for f in planned.refused if f.why != CHANGED}
    done = Done(planned.turn, restored, removed, refused, why)
    checkpoints.mark_undone(planned.turn, done.note())
    return done


class _Changed(Exception):
    """The file changed between the plan and its undo."""


def _plan_file(checkpoints: Checkpoints, turn: int, entry: Entry) -> FilePlan:
    shown, path = entry.shown, entry.path
    try:
        now = _read(path)
    except (OSError, nofollow.Swapped, _NotAFile):
        return FilePlan(shown, path, "refuse", "it is not a regular file now")
    current = None if now is None else digest(now)
    before = entry.before
    if before == DROPPED:
        return FilePlan(shown, path, "refuse", "its earlier content held forgotten text: dropped")
    if before is not None and before.startswith(UNKEPT):
        return FilePlan(shown, path, "refuse", f"its earlier content was not kept ({before})")
    try:
        restored = None if before is None else checkpoints.saved(turn, before)
    except OSError:
        return FilePlan(shown, path, "refuse", "its earlier content is gone from the checkpoint")
    if now == restored:
        return FilePlan(shown, path, "same", "it already holds what it held before the turn")
    if current != entry.written:
        return FilePlan(shown, path, "refuse", CHANGED, current=current)
    action: Action = "remove" if restored is None else "restore"
    diff = tuple(_diff(shown, now, restored))
    return FilePlan(shown, path, action, "", diff, restored, current)


class _NotAFile(Exception):
    pass


def _read(path: Path) -> bytes | None:
    """The file's bytes, None when there is none; _NotAFile for a folder, a link and the like."""
    try:
        folder = nofollow.open_folder(path.parent)
    except FileNotFoundError:
        return None
    try:
        found = nofollow.kind(folder, path.name)
        if found is None:
            return None
        if found != stat.S_IFREG:
            raise _NotAFile(path)
        return nofollow.read(folder, path.name)
    finally:
        os.close(folder)


def _carry_out(f: FilePlan) -> None:
    folder = nofollow.open_folder(f.path.parent)
    try:
        if nofollow.kind(folder, f.path.name) != stat.S_IFREG:
            raise _Changed(f.shown)
        now = nofollow.read(folder, f.path.name)
        if digest(now) != f.current:
            raise _Changed(f.shown)
        if f.restored is None:
            os.unlink(f.path.name, dir_fd=folder)
        else:
            nofollow.replace(folder, f.path.parent, f.path.name, f.restored)
    finally:
        with contextlib.suppress(OSError):
            os.close(folder)


def _diff(shown: str, now: bytes | None, restored: bytes | None) -> list[str]:
    """A unified diff from the file as it is to the file as it will be."""
    old, new = _text(now), _text(restored)
    if old is None or new is None:
        sizes = f"{_size(now)} → {_size(restored)}"
        return [f"--- {shown}", f"+++ {shown} (restored)", f"binary content: {sizes}"]
    lines = list(
        difflib.unified_diff(
            old.splitlines(keepends=True),
            new.splitlines(keepends=True),
            fromfile=shown if now is not None else "/dev/null",
            tofile=f"{shown} (restored)" if restored is not None else "/dev/null",
        )
    )
    out = [line.rstrip("\n") for line in lines[:DIFF_LINES]]
    if len(lines) > DIFF_LINES:
        out.append(f"… {len(lines) - DIFF_LINES:,} more lines of diff")
    return out


def _size(data: bytes | None) -> str:
    return "no file" if data is None else f"{len(data):,} bytes"


def _text(data: bytes | None) -> str | None:
    """The bytes as text to diff ('' for no file); None for binary content."""
    if data is None:
        return ""
    if b"\0" in data:
        return None
    return data.decode("utf-8", "replace")
