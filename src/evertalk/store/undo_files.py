"""The files undo keeps (`<home>/checkpoints/<turn>/`, written by agent/tools/checkpoints.py) as
a forget sees them (SPEC §12): a file's content before a turn wrote it may hold the text taken
out. Such a content is dropped rather than rewritten (undo would put back a file the user never
had), and its line in the turn's `index.jsonl` says so, so that undo refuses that file in one
line; a path that held the text is replaced in the index too, and its content dropped.

Here, in the store, so that `memory forget`, a client of the service, reaches it without loading
the agent.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

from evertalk.store.finder import Finder
from evertalk.store.secure import fsync_dir, write_atomic

CHECKPOINTS_DIR: Final = "checkpoints"
INDEX: Final = "index.jsonl"
UNDONE: Final = "undone"
"""Written in a turn's folder once it was undone: `/undo` then goes to the turn before."""
UNKEPT: Final = "unkept: "
DROPPED: Final = UNKEPT + "it held text that a forget took out"
"""The `before` of a file whose saved content a forget dropped."""


def turn_folders(home: Path) -> Iterator[Path]:
    root = home / CHECKPOINTS_DIR
    if root.is_dir():
        for folder in sorted(root.iterdir()):
            if folder.is_dir() and not folder.is_symlink() and folder.name.isdigit():
                yield folder


def holding(home: Path, finder: Finder) -> list[int]:
    """The turns whose checkpoint holds the text (for the preview)."""
    return [int(folder.name) for folder in turn_folders(home) if _Turn(folder, finder).changes()]


def scrub(home: Path, finder: Finder) -> list[Path]:
    """Drop every kept content that holds the text, and the text from each index and note;
    the files changed or removed. The index is written first: a crash before the contents go
    leaves files no line names, which the next forget finds and removes."""
    done: list[Path] = []
    for folder in turn_folders(home):
        done += _Turn(folder, finder).apply()
    return done


class _Turn:
    """One turn's folder and what a forget changes in it."""

    def __init__(self, folder: Path, finder: Finder) -> None:
        self.folder = folder
        self.finder = finder
        lines = _read_lines(folder / INDEX)
        self.drop = {
            path.name for path in _contents(folder) if finder.holds_bytes(path.read_bytes())
        }
        new_lines = [self._line(line) for line in lines]
        self.index = None if new_lines == lines else b"".join(map(_encode, new_lines))
        self.undone: bytes | None = None
        if (folder / UNDONE).is_file():
            text = (folder / UNDONE).read_bytes().decode("utf-8", "surrogateescape")
            if finder.holds(text):
                self.undone = _bytes(finder.replace(text))

    def _line(self, line: Any) -> Any:
        if isinstance(line, str):
            return self.finder.replace(line)
        if not isinstance(line, dict):
            return line
        new = {key: _walk(value, self.finder) for key, value in line.items()}
        saved = _saved(line)
        if saved is not None and (saved in self.drop or new != line):
            new["before"] = DROPPED
            self.drop.add(saved)
        return new

    def changes(self) -> bool:
        return bool(self.drop) or self.index is not None or self.undone is not None

    def apply(self) -> list[Path]:
        done = []
        if self.index is not None:
            write_atomic(self.folder / INDEX, self.index)
            done.append(self.folder / INDEX)
        if self.undone is not None:
            write_atomic(self.folder / UNDONE, self.undone)
            done.append(self.folder / UNDONE)
        for name in sorted(self.drop):
            (self.folder / name).unlink(missing_ok=True)
            done.append(self.folder / name)
        if self.drop:
            fsync_dir(self.folder)
        return done


def _contents(folder: Path) -> list[Path]:
    """The turn's files but its index and note: the contents it kept, and any left over."""
    return [
        path
        for path in sorted(folder.iterdir())
        if path.name not in (INDEX, UNDONE) and path.is_file() and not path.is_symlink()
    ]


def _read_lines(path: Path) -> list[Any]:
    """The index's lines as JSON values; a line that is none (a torn one) as its text."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return []
    lines: list[Any] = []
    for raw in data.decode("utf-8", "surrogateescape").splitlines():
        try:
            lines.append(json.loads(raw))
        except ValueError:
            lines.append(raw)
    return lines


def _saved(line: Any) -> str | None:
    """The name of the content the line keeps, if any."""
    before = line.get("before") if isinstance(line, dict) else None
    return before if isinstance(before, str) and not before.startswith(UNKEPT) else None


def _walk(value: Any, finder: Finder) -> Any:
    if isinstance(value, str):
        return finder.replace(value)
    return value


def _encode(line: Any) -> bytes:
    text = line if isinstance(line, str) else json.dumps(line)  # as checkpoints.py writes it
    return _bytes(text + "\n")


def _bytes(text: str) -> bytes:
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass")


__all__ = ["CHECKPOINTS_DIR", "DROPPED", "INDEX", "UNDONE", "UNKEPT", "holding", "scrub"]
