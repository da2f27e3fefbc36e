"""`index/meta.json`: the checkpoint that says how much of the log the index files reflect."""

from __future__ import annotations

import json
import os
import sys
import time
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evertalk.store.secure import write_atomic

# hashlib.blake2b is this very function (hashlib never takes BLAKE2 from OpenSSL): taken from its
# own module, it spares every open the 2 ms that loading OpenSSL for hashlib costs.
try:
    from _blake2 import blake2b
except ImportError:  # an interpreter without the module: hashlib's, whatever it is there
    from hashlib import blake2b

VERSION = 1
META_NAME = "meta.json"


@dataclass(slots=True)
class FileState:
    """How much of one log or tree file the index reflects."""

    no: int
    """The number locations use for this file."""
    scanned: int
    """Offset just after the last complete line the index reflects."""
    lines: int
    """Complete lines up to `scanned`, so that warnings name the right line numbers."""
    tail: str = ""
    """A hash of the bytes just before `scanned` (see `tail_hash`); empty when not taken."""
    tail_at: int = 0
    """The `scanned` that `tail` was taken at."""
    seen: tuple[int, int] | None = None
    """The file's size and modification time (ns) when `tail` was last found right, if its clock
    had settled then (see `seal`): while the file keeps both, its tail need not be read again."""


@dataclass(slots=True)
class Meta:
    """The checkpoint, as meta.json holds it."""

    build: str
    """Changes at every rebuild, so a reader can tell that the files changed under it."""
    files: dict[str, FileState] = field(default_factory=dict)
    messages: int = 0
    levels: list[int] = field(default_factory=list)
    """Records in each level's files (highest built index + 1)."""

    def to_json(self) -> bytes:
        files = {name: _file_json(state) for name, state in self.files.items()}
        obj = {
            "version": VERSION,
            "byteorder": sys.byteorder,
            "build": self.build,
            "files": files,
            "messages": self.messages,
            "levels": self.levels,
        }
        return json.dumps(obj, separators=(",", ":")).encode("utf-8")

    def entry(self, name: str) -> FileState:
        """The state of log file `name`, numbered and empty when the file is new."""
        state = self.files.get(name)
        if state is None:
            number = max((s.no for s in self.files.values()), default=-1) + 1
            state = self.files[name] = FileState(number, 0, 0)
        return state

    def file_names(self) -> dict[int, str]:
        return {state.no: name for name, state in self.files.items()}

    def copy(self) -> Meta:
        files = {
            name: FileState(s.no, s.scanned, s.lines, s.tail, s.tail_at, s.seen)
            for name, s in self.files.items()
        }
        return Meta(self.build, files, self.messages, list(self.levels))


def _file_json(state: FileState) -> dict[str, object]:
    obj: dict[str, object] = {
        "no": state.no,
        "scanned": state.scanned,
        "lines": state.lines,
        "tail": state.tail,
    }
    if state.seen is not None:
        obj["seen"] = list(state.seen)
    return obj


TAIL = 4096  # bytes hashed at the end of each file's indexed part


def tail_hash(path: Path, end: int) -> str:
    """A hash of the up to TAIL bytes of `path` before offset `end`.

    Checked at every open: a line garbled in a file's last few kilobytes since the checkpoint
    is noticed then, rather than at the next read of that line (or never).
    """
    start = max(0, end - TAIL)
    with open(path, "rb", buffering=0) as file:
        file.seek(start)
        data = file.read(end - start)
    return blake2b(data, digest_size=8).hexdigest()


SETTLED_NS = 3_000_000_000
"""How long ago a file must have been written for its modification time to vouch for it: any
later write then gives it another (file systems' clocks tick in at most 2 s)."""


def _settled(path: Path, now: int) -> tuple[int, int] | None:
    """The file's size and modification time, when it was last written SETTLED_NS before `now`."""
    try:
        stat = os.stat(path)
    except OSError:
        return None
    return (stat.st_size, stat.st_mtime_ns) if now - stat.st_mtime_ns >= SETTLED_NS else None


def seal(meta: Meta, chat_dir: Path) -> None:
    """Take the tail hash of every file whose indexed part grew since its last one, and note
    the size and time of files that have settled since, each checked once more before: an open
    then reads the tails of changed files alone, not of every day of a long chat's log."""
    now = time.time_ns()
    for name, state in meta.files.items():
        if not state.scanned:
            continue
        path = chat_dir / name
        if not state.tail or state.tail_at != state.scanned:
            seen = _settled(path, now)  # before the hash: a write after it shows in the time
            state.tail, state.tail_at = tail_hash(path, state.scanned), state.scanned
            state.seen = seen
        elif state.seen is None:
            seen = _settled(path, now)
            if seen is not None and tail_hash(path, state.scanned) == state.tail:
                state.seen = seen


def tails_changed(
    meta: Meta, chat_dir: Path, stats: Mapping[str, tuple[int, int]], always: Collection[str]
) -> str | None:
    """The first file whose indexed end no longer hashes as it did, or None.

    `stats` holds each file's size and modification time now. A file that still has those
    `seen` at the checkpoint is taken as it was then, unless it is in `always` (each folder's
    newest, where writes go); any other is read, and forgets its `seen` until the next seal.
    """
    for name, state in meta.files.items():
        if not state.tail or not state.scanned:
            continue
        if state.seen is not None and name not in always and stats.get(name) == state.seen:
            continue
        if tail_hash(chat_dir / name, state.scanned) != state.tail:
            return name
        if stats.get(name) != state.seen:
            state.seen = None
    return None


def new_build() -> str:
    return os.urandom(8).hex()


def _count(value: object) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    raise ValueError("a count is not a non-negative integer")


def _counts(*values: object) -> bool:
    """Whether all are non-negative integers (JSON's booleans are not): quick, as it runs for
    each of the thousands of files of a long chat's log at every open."""
    for value in values:  # noqa: SIM110 - a loop is faster than all() of a generator
        if type(value) is not int or value < 0:
            return False
    return True


def _file_state(value: object) -> FileState:
    if not isinstance(value, dict):
        raise ValueError("a file entry is not an object")
    no, scanned, lines = value["no"], value["scanned"], value["lines"]
    tail, seen = value.get("tail", ""), value.get("seen")
    if not _counts(no, scanned, lines):
        raise ValueError("a count is not a non-negative integer")
    if not isinstance(tail, str):
        raise ValueError("a file's tail hash is not a string")
    if seen is not None:
        if not isinstance(seen, list) or len(seen) != 2 or not _counts(*seen):
            raise ValueError("a file's size and time are not a pair of counts")
        seen = (seen[0], seen[1])
    return FileState(no, scanned, lines, tail, scanned, seen)


def _parse(obj: Any) -> Meta:
    if not isinstance(obj, dict) or obj.get("version") != VERSION:
        raise ValueError("unknown version")
    if obj.get("byteorder") != sys.byteorder:
        raise ValueError("written on a machine of another byte order")
    build, files, levels = obj["build"], obj["files"], obj["levels"]
    if not isinstance(build, str) or not isinstance(files, dict) or not isinstance(levels, list):
        raise ValueError("wrongly typed fields")
    states = {str(name): _file_state(value) for name, value in files.items()}
    if len({state.no for state in states.values()}) != len(states):
        raise ValueError("two files share a number")
    return Meta(build, states, _count(obj["messages"]), [_count(n) for n in levels])


def read_meta(index_dir: Path) -> Meta | str | None:
    """The checkpoint; None when there is none, or the reason it cannot be used."""
    try:
        raw = (index_dir / META_NAME).read_bytes()
    except FileNotFoundError:
        return None
    except OSError as error:
        return f"cannot read it ({error.strerror})"
    try:
        return _parse(json.loads(raw))
    except (ValueError, KeyError, TypeError) as error:
        return f"meta.json is damaged ({error})"


def write_meta(index_dir: Path, meta: Meta) -> None:
    write_atomic(index_dir / META_NAME, meta.to_json())


def read_build(index_dir: Path) -> str | None:
    """The build token alone, to check that no rebuild happened while a reader loaded the files."""
    meta = read_meta(index_dir)
    return meta.build if isinstance(meta, Meta) else None
