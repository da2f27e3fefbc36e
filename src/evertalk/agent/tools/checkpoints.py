"""What a turn's `write` and `edit` replaced, kept so that `/undo` can put it back.

Each turn that changes a file has a folder `<home>/checkpoints/<turn>/` (0700): `index.jsonl`,
one line per write, and `<n>.before`, the content the n-th file the turn changed had before
(0600). A line names the resolved path, how to show it, the saved content (`null`: the file did
not exist; `"unkept: why"`: too large, not a regular file, or dropped by a forget because it held
the text forgotten, see store/undo_files.py), and the SHA-256 of what the turn wrote, which
tells undo whether the file changed since. The line and the saved content are
synced before the file is written: a write that then fails leaves the file as it was, and undo
sees nothing to restore there.

A subagent's writes belong to the turn that started it: one undo takes back a turn and the
helpers it sent. Commands run with `shell` are not tracked. Checkpoints older than
`[undo] keep_days`, and the oldest beyond `[undo] max_mb` in all, are removed when a turn
makes its first change.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from evertalk.config import Config
from evertalk.store.secure import write_all
from evertalk.store.undo_files import INDEX, UNDONE, UNKEPT


class CheckpointError(Exception):
    """The previous content could not be kept: the write does not happen (one line)."""


@dataclass(frozen=True)
class Limits:
    """How long checkpoints are kept, and how much room they may take in all."""

    keep_days: float = 14.0
    max_bytes: int = 200 * 1024 * 1024


def limits_of(config: Config) -> Limits:
    """The limits `[undo]` of config.toml sets."""
    return Limits(config.undo_keep_days, int(config.undo_max_mb * 1024 * 1024))


@dataclass(frozen=True)
class Entry:
    """One file a turn changed: where, how it is shown, what it held before (`before`: the
    saved file's name, None when it did not exist, or `unkept: why`), what the turn wrote last."""

    path: Path
    shown: str
    before: str | None
    written: str


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _private_folder(path: Path) -> None:
    path.mkdir(mode=0o700, parents=True, exist_ok=True)
    path.chmod(0o700)


def _write_private(path: Path, data: bytes, *, append: bool = False) -> None:
    """`data` as the file's whole content (after what it holds, with `append`), mode 0600,
    never through a link, on disk before this returns."""
    how = os.O_APPEND if append else os.O_TRUNC
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | how | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600)
    try:
        write_all(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)


class TurnCheckpoint:
    """The checkpoint of one turn; its folder is made at the turn's first change."""

    def __init__(self, store: Checkpoints, turn: int) -> None:
        self.store = store
        self.turn = turn
        self.folder = store.root / str(turn)
        self._kept: dict[Path, int] = {}  # path -> its number in this turn

    def record(self, path: Path, shown: str, before: bytes | str | None, after: bytes) -> None:
        """Before `path` is written: its previous content (None: absent; a str: why it is not
        kept) saved on the turn's first change of it, and what is about to be written."""
        try:
            self._record(path, shown, before, after)
        except OSError as error:
            raise CheckpointError(
                f"the previous content of {shown} could not be kept for undo "
                f"({error.strerror or error}); nothing was written"
            ) from None

    def _record(self, path: Path, shown: str, before: bytes | str | None, after: bytes) -> None:
        fresh = not self.folder.exists()
        if fresh:
            _private_folder(self.store.root)
            _private_folder(self.folder)
        line: dict[str, object] = {"path": str(path), "written": digest(after)}
        if path not in self._kept:
            number = len(self._kept)
            saved: str | None
            if isinstance(before, bytes) and len(before) > self.store.limits.max_bytes:
                saved = f"{UNKEPT}larger than [undo] max_mb"
            elif isinstance(before, bytes):
                saved = f"{number}.before"
                _write_private(self.folder / saved, before)
            else:
                saved = before
            line |= {"shown": shown, "before": saved}
            self._kept[path] = number
        _write_private(self.folder / INDEX, (json.dumps(line) + "\n").encode(), append=True)
        if fresh:  # once a turn, its first content counted
            self.store.prune(keep=self.turn)


class Checkpoints:
    """The checkpoints of a home (`<home>/checkpoints/`)."""

    def __init__(self, root: Path, limits: Limits | None = None) -> None:
        self.root = root
        self.limits = limits or Limits()

    def turn(self, turn: int) -> TurnCheckpoint:
        return TurnCheckpoint(self, turn)

    def turns(self) -> list[int]:
        """The turns with a checkpoint, oldest first."""
        try:
            names = [p.name for p in self.root.iterdir() if p.is_dir()]
        except FileNotFoundError:
            return []
        return sorted(int(name) for name in names if name.isdigit())

    def undoable(self) -> list[int]:
        """The turns with a checkpoint not undone yet, oldest first."""
        return [turn for turn in self.turns() if not self.undone(turn)]

    def undone(self, turn: int) -> bool:
        return (self.root / str(turn) / UNDONE).exists()

    def mark_undone(self, turn: int, text: str) -> None:
        with contextlib.suppress(FileNotFoundError):  # pruned meanwhile: nothing to mark
            _write_private(self.root / str(turn) / UNDONE, text.encode())

    def entries(self, turn: int) -> list[Entry]:
        """The files the turn changed, in the order it first changed them; the last write of
        each gives what it wrote. A torn last line (a crash as it was written) is skipped."""
        first: dict[str, dict[str, object]] = {}
        last: dict[str, str] = {}
        for item in _lines(self.root / str(turn) / INDEX):
            path = str(item.get("path"))
            if "before" in item and path not in first:
                first[path] = item
            last[path] = str(item.get("written"))
        return [
            Entry(Path(path), str(item.get("shown") or path), _before(item), last[path])
            for path, item in first.items()
        ]

    def saved(self, turn: int, name: str) -> bytes:
        return (self.root / str(turn) / name).read_bytes()

    def prune(self, *, keep: int | None = None, now: float | None = None) -> list[int]:
        """Remove checkpoints older than `keep_days`, then the oldest while all of them (`keep`
        too) take more than `max_bytes`; never the turn `keep`. The turns removed."""
        now = time.time() if now is None else now
        oldest = now - self.limits.keep_days * 86_400
        removed: list[int] = []
        sizes: dict[int, int] = {}
        kept = 0
        for turn in self.turns():
            folder = self.root / str(turn)
            if turn == keep:
                kept = _size(folder)
                continue
            if _modified(folder) < oldest:
                _remove(folder)
                removed.append(turn)
            else:
                sizes[turn] = _size(folder)
        total = kept + sum(sizes.values())
        for turn in sorted(sizes):
            if total <= self.limits.max_bytes:
                break
            _remove(self.root / str(turn))
            total -= sizes[turn]
            removed.append(turn)
        return removed


def _before(item: dict[str, object]) -> str | None:
    value = item.get("before")
    return value if isinstance(value, str) else None


def _lines(path: Path) -> Iterator[dict[str, object]]:
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return
    for line in text.splitlines():
        with contextlib.suppress(ValueError):
            item = json.loads(line)
            if isinstance(item, dict) and "path" in item and "written" in item:
                yield item


def _modified(folder: Path) -> float:
    """When the turn last changed a file: its index's time (the folder's, without one)."""
    try:
        return (folder / INDEX).stat().st_mtime
    except FileNotFoundError:
        return folder.stat().st_mtime


def _size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.iterdir() if p.is_file())


def _remove(folder: Path) -> None:
    shutil.rmtree(folder, ignore_errors=True)
