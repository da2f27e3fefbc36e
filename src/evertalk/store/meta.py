"""`index/meta.json`: the checkpoint that says how much of the log the index files reflect."""

from __future__ import annotations

import json
import os
import sys
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
        files = {
            name: {"no": s.no, "scanned": s.scanned, "lines": s.lines, "tail": s.tail}
            for name, s in self.files.items()
        }
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
            name: FileState(s.no, s.scanned, s.lines, s.tail, s.tail_at)
            for name, s in self.files.items()
        }
        return Meta(self.build, files, self.messages, list(self.levels))


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


def seal(meta: Meta, chat_dir: Path) -> None:
    """Take the tail hash of every file whose indexed part grew since its last one."""
    for name, state in meta.files.items():
        if state.scanned and (not state.tail or state.tail_at != state.scanned):
            state.tail, state.tail_at = tail_hash(chat_dir / name, state.scanned), state.scanned


def tails_changed(meta: Meta, chat_dir: Path) -> str | None:
    """The first file whose indexed end no longer hashes as it did, or None."""
    for name, state in meta.files.items():
        if state.tail and state.scanned and tail_hash(chat_dir / name, state.scanned) != state.tail:
            return name
    return None


def new_build() -> str:
    return os.urandom(8).hex()


def _count(value: object) -> int:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    raise ValueError("a count is not a non-negative integer")


def _file_state(value: object) -> FileState:
    if not isinstance(value, dict):
        raise ValueError("a file entry is not an object")
    scanned, tail = _count(value["scanned"]), value.get("tail", "")
    if not isinstance(tail, str):
        raise ValueError("a file's tail hash is not a string")
    return FileState(_count(value["no"]), scanned, _count(value["lines"]), tail, scanned)


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
