"""The other places under the home where a forgotten text may lie besides the log, the tree and
the search database (SPEC §12), and how each is scrubbed:

- in the chat folder, held messages, subagents' logs, the copies a repair keeps in `damaged/`,
  tree lines set aside in `quarantine/` and the compactor's status: each JSON line's strings
  replaced (the pages of a long message as one text), each file rewritten atomically;
- a copy of the log in `damaged/` also gets each forgotten message's new line in place of its
  line of that id, readable or not (a damaged line's text cannot be searched), and a line set
  aside that summarized a forgotten message goes, as the tree's nodes over it do;
- the usage ledger, the service's log and the MCP servers' logs, which their writers keep open
  for appending: rewritten in place;
- undo's checkpoints (`undo_files.py`);
- images no message names any more are deleted.

Every file is read as bytes and its text decoded with surrogate escapes, so that a line that is
not UTF-8 (a damaged one) is scrubbed too and keeps its other bytes as they were.
"""

from __future__ import annotations

import json
import os
from bisect import bisect_left
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from evertalk.store import undo_files
from evertalk.store.checkpoint import MAIN
from evertalk.store.days import list_day_files
from evertalk.store.finder import Finder
from evertalk.store.held import HELD_FILE
from evertalk.store.records import claimed_id
from evertalk.store.secure import fsync_dir, write_all, write_atomic

IMAGES_DIR = "images"
DAMAGED_DIR, QUARANTINE_DIR, AGENTS_DIR = "damaged", "quarantine", "agents"
STATUS_FILE = "compactor.json"
LEDGER_FILE, SERVICE_LOG, MCP_LOGS = "usage.jsonl", "service.log", "mcp"


@dataclass(frozen=True)
class Scrub:
    """What a forget takes out of the copies."""

    finder: Finder
    records: dict[int, bytes] = field(default_factory=dict)
    """The forgotten messages' new lines, by id: a copy of the log gets each in place of its
    line of that id."""
    named: dict[tuple[str, int], int] = field(default_factory=dict)
    """(copy, line number) of the damaged lines that repair notes of forgotten messages name,
    the copy relative to the chat folder: the id of each."""

    @cached_property
    def _ids(self) -> list[int]:
        return sorted(self.records)

    def covers(self, level: int, index: int) -> bool:
        """Whether tree node (level, index) summarized a forgotten message."""
        ids = self._ids
        at = bisect_left(ids, index << level)
        return at < len(ids) and ids[at] < (index + 1) << level


Scrubbed = Callable[[Path, bytes, "Scrub"], "bytes | None"]
"""A file's new bytes, None when it holds nothing sought."""


@dataclass(frozen=True)
class _Copy:
    what: str
    """The place, as the preview names it."""
    path: Path
    scrubbed: Scrubbed
    write: Callable[[Path, bytes], None] = write_atomic


def holding(home: Path, scrub: Scrub) -> list[tuple[str, list[Path]]]:
    """The places that hold the text, each with its files (for the preview)."""
    found: dict[str, list[Path]] = {}
    for copy in _copies(home):
        if copy.scrubbed(copy.path, copy.path.read_bytes(), scrub) is not None:
            found.setdefault(copy.what, []).append(copy.path)
    turns = undo_files.holding(home, scrub.finder)
    if turns:
        found["undo checkpoints"] = [home / undo_files.CHECKPOINTS_DIR / str(t) for t in turns]
    return list(found.items())


def scrub_copies(home: Path, scrub: Scrub, images: list[str]) -> list[Path]:
    """Remove the images no message names any more, and the text from every other copy;
    returns the files rewritten or removed."""
    _drop_unused_images(home / "chat", images)
    done = []
    for copy in _copies(home):
        new = copy.scrubbed(copy.path, copy.path.read_bytes(), scrub)
        if new is not None:
            copy.write(copy.path, new)
            done.append(copy.path)
    return done + undo_files.scrub(home, scrub.finder)


def _copies(home: Path) -> Iterator[_Copy]:
    chat = home / "chat"
    for what, path in (
        ("held messages", chat / HELD_FILE),
        ("the compactor's status", chat / STATUS_FILE),
    ):
        if _regular(path):
            yield _Copy(what, path, _json_lines)
    folders: list[tuple[str, Path, Scrubbed]] = [
        ("subagents' logs", chat / AGENTS_DIR, _json_lines),
        ("copies a repair kept", chat / DAMAGED_DIR, _damaged(chat)),
        ("tree lines set aside", chat / QUARANTINE_DIR, _set_aside),
    ]
    for what, folder, how in folders:
        for path in _files(folder):
            yield _Copy(what, path, how)
    for path in _files(chat):
        copied = path.relative_to(chat).parts[0] in (AGENTS_DIR, DAMAGED_DIR, QUARANTINE_DIR)
        if path.name.endswith(".tmp") and not copied:
            yield _Copy("leftovers of writes a crash cut short", path, _json_lines, _remove)
    if _regular(home / LEDGER_FILE):
        yield _Copy("the usage ledger", home / LEDGER_FILE, _json_lines, _write_in_place)
    if _regular(home / SERVICE_LOG):
        yield _Copy("the service's log", home / SERVICE_LOG, _text_lines, _write_in_place)
    for path in _files(home / MCP_LOGS):
        yield _Copy("MCP servers' logs", path, _text_lines, _write_in_place)


def _regular(path: Path) -> bool:
    return path.is_file() and not path.is_symlink()


def _files(folder: Path) -> Iterator[Path]:
    if folder.is_dir() and not folder.is_symlink():
        for path in sorted(folder.rglob("*")):
            if _regular(path):
                yield path


# -- the kinds of copy ---------------------------------------------------------------------------


def _text_lines(path: Path, data: bytes, scrub: Scrub) -> bytes | None:
    text = _text(data)
    new = "\n".join(scrub.finder.replace(line) for line in text.split("\n"))
    return None if new == text else _bytes(new)


def _json_lines(path: Path, data: bytes, scrub: Scrub) -> bytes | None:
    return _lines(data, scrub, lambda n, raw, value: None)


def _damaged(chat: Path) -> Scrubbed:
    """A copy of a log file (`damaged/<time>/main/<day>`) gets the forgotten messages' lines by
    id; other copies have their strings replaced."""

    def scrubbed(path: Path, data: bytes, scrub: Scrub) -> bytes | None:
        name = str(path.relative_to(chat))
        if path.parent.name != MAIN or not scrub.records:
            return _json_lines(path, data, scrub)

        def by_id(n: int, raw: str, value: Any) -> bytes | None:
            i = value.get("i") if isinstance(value, dict) else claimed_id(_bytes(raw))
            if type(i) is not int:
                i = scrub.named.get((name, n + 1))
            return None if i is None else scrub.records.get(i)

        return _lines(data, scrub, by_id)

    return scrubbed


def _set_aside(path: Path, data: bytes, scrub: Scrub) -> bytes | None:
    """Tree lines: one over a forgotten message goes (as an empty line)."""

    def over(n: int, raw: str, value: Any) -> bytes | None:
        if isinstance(value, dict):
            level, index = value.get("l"), value.get("i")
            if isinstance(level, int) and isinstance(index, int) and scrub.covers(level, index):
                return b""
        return None

    return _lines(data, scrub, over)


# -- JSON lines --------------------------------------------------------------------------------

Fixed = Callable[[int, str, Any], "bytes | None"]
"""A line's replacement decided by what it is (line number from 0, its text, its JSON value or
None), None for the usual scrub."""


def _lines(data: bytes, scrub: Scrub, fixed: Fixed) -> bytes | None:
    """The file's bytes with each line scrubbed (JSON lines keep their shape), or None when
    nothing changes."""
    raws = _text(data).split("\n")
    values = [_parse(raw) for raw in raws]
    texts = _page_texts(values, scrub.finder)
    out: list[bytes] = []
    changed = False
    for n, (raw, value) in enumerate(zip(raws, values, strict=True)):
        new = fixed(n, raw, value)
        if new is None:
            new = _line(raw, value, scrub.finder, texts.get(n))
        changed |= new != _bytes(raw)
        out.append(new)
    return b"\n".join(out) if changed else None


def _parse(raw: str) -> Any:
    try:
        return json.loads(raw) if raw.strip() else None
    except (ValueError, RecursionError):
        return None


def _line(raw: str, value: Any, finder: Finder, text: str | None) -> bytes:
    if value is None:
        return _bytes(finder.replace(raw))
    new = _walk(value, finder, text)
    if new == value:
        return _bytes(raw)
    try:
        return json.dumps(new, ensure_ascii=False).encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:  # a lone surrogate that no byte gave: as its escape
        return json.dumps(new).encode("ascii")


def _page_texts(values: list[Any], finder: Finder) -> dict[int, str]:
    """The new text of each line that is a page of a long message (`part` of `parts`), its
    pages searched as one text."""
    texts: dict[int, str] = {}
    group: list[int] = []
    parts = 0  # of the group's message
    for n, value in enumerate(values):
        part = _part(value)
        if part is not None and part[0] == 0:
            group, parts = [n], part[1]
        elif part is not None and group and part == (len(group), parts):
            group.append(n)
        else:
            group = []
            continue
        if len(group) == parts:
            pages = finder.replace_pages([values[k]["text"] for k in group])
            texts.update(zip(group, pages, strict=True))
            group = []
    return texts


def _part(value: Any) -> tuple[int, int] | None:
    if not isinstance(value, dict) or not isinstance(value.get("text"), str):
        return None
    part, parts = value.get("part"), value.get("parts")
    if type(part) is int and type(parts) is int and 0 <= part < parts:
        return part, parts
    return None


def _walk(value: Any, finder: Finder, text: str | None = None) -> Any:
    if isinstance(value, str):
        return finder.replace(value)
    if isinstance(value, list):
        return [_walk(item, finder) for item in value]
    if isinstance(value, dict):
        walked = {key: _walk(item, finder) for key, item in value.items()}
        if text is not None:
            walked["text"] = text
        new = walked.get("text")
        if isinstance(new, str) and new != value.get("text") and isinstance(value.get("size"), int):
            walked["size"] = len(new.encode("utf-8", "surrogatepass"))  # a record stays whole
        return walked
    return value


def _text(data: bytes) -> str:
    return data.decode("utf-8", "surrogateescape")


def _bytes(text: str) -> bytes:
    try:
        return text.encode("utf-8", "surrogateescape")
    except UnicodeEncodeError:
        return text.encode("utf-8", "surrogatepass")


def _write_in_place(path: Path, data: bytes) -> None:
    """For a file its writer keeps open for appending: the same file, its content replaced."""
    fd = os.open(path, os.O_WRONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    try:
        write_all(fd, data, 0)
        os.ftruncate(fd, len(data))
        os.fsync(fd)
    finally:
        os.close(fd)


def _remove(path: Path, data: bytes) -> None:
    """A file a crash left beside the one it was to replace: each write starts it anew."""
    path.unlink(missing_ok=True)
    fsync_dir(path.parent)


def _drop_unused_images(chat_dir: Path, images: list[str]) -> None:
    """Delete each image file that no message and no held message names any more."""
    if not images:
        return
    texts = [(chat_dir / MAIN / name).read_bytes() for name in list_day_files(chat_dir / MAIN)]
    held = chat_dir / HELD_FILE
    if held.is_file():
        texts.append(held.read_bytes())
    for name in images:
        needle = json.dumps(name).encode("utf-8")
        if not any(needle in data for data in texts) and "/" not in name:
            (chat_dir / IMAGES_DIR / name).unlink(missing_ok=True)
    if (chat_dir / IMAGES_DIR).is_dir():
        fsync_dir(chat_dir / IMAGES_DIR)


__all__ = ["Scrub", "holding", "scrub_copies"]
