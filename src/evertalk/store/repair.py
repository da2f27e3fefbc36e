"""`evertalk memory repair`: a log with messages that cannot be read opens again, losing nothing
more than was already lost.

A damaged line, or a day file deleted or cut short in the middle of the log, leaves ids with no
readable record, and SPEC §1.2 refuses to open a log with a gap. The repair copies every file it
changes aside first (`chat/damaged/<time>/`), then puts a record back at each missing id:

- a page of a long message whose other pages are gone is kept, as a message of its own;
- a damaged line that held the id becomes a `note` of that id saying what happened;
- an id that no line holds any more gets such a note, in the file of the message before it.

Tree nodes built from the original text stay as they were (they summarize what was there);
nodes not built yet are built from the notes. The index is rebuilt at the next open.
"""

from __future__ import annotations

import os
import shutil
from collections import defaultdict
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from evertalk.store.days import list_day_files
from evertalk.store.edits import record_edit
from evertalk.store.errors import CorruptLog
from evertalk.store.jsonl import TORN, Line, Scan
from evertalk.store.line_files import torn_terminator
from evertalk.store.lock import ChatLock
from evertalk.store.meta import META_NAME
from evertalk.store.pages import verdicts
from evertalk.store.records import MessageRecord, claimed_id, encode_message
from evertalk.store.secure import fsync_dir, make_dir, write_atomic

DAMAGED_DIR = "damaged"
INDEX_DIR, MAIN = "index", "main"


@dataclass(frozen=True, slots=True)
class Fixed:
    """One id given a record again: how, and what of the message is left."""

    i: int
    how: str
    """`kept` (a page of an unfinished write), `damaged` (a note in place of a bad line) or
    `lost` (a note for an id no line holds)."""
    where: str
    """The file (relative to the chat folder) that now holds it, and its line, if any."""


@dataclass(slots=True)
class Report:
    fixed: list[Fixed] = field(default_factory=list)
    copies: Path | None = None
    """Where the files were copied as they were before the repair."""


@dataclass(frozen=True, slots=True)
class _Bad:
    """A line that holds no message: damaged, or a torn write's leftover."""

    name: str
    line: Line
    reason: str
    raw: bytes


@dataclass(slots=True)
class _Read:
    """What a full read of the message files found."""

    good: dict[int, tuple[str, MessageRecord]] = field(default_factory=dict)
    lost_pages: dict[int, tuple[str, Line, MessageRecord]] = field(default_factory=dict)
    bad: list[_Bad] = field(default_factory=list)
    order: dict[str, list[tuple[Line, int | None]]] = field(default_factory=dict)
    """Per file, its lines in order with the id each counts for (None: skipped)."""


@dataclass(slots=True)
class _Edits:
    """Per file: lines to replace (by offset) and lines to add at the end."""

    replace: dict[str, dict[int, tuple[int, bytes]]] = field(
        default_factory=lambda: defaultdict(dict)
    )
    append: dict[str, list[bytes]] = field(default_factory=lambda: defaultdict(list))

    def files(self) -> list[str]:
        return sorted(set(self.replace) | set(self.append))


def repair(chat_dir: Path) -> Report:
    """Give every missing id a record again (see the module's text); takes the chat's lock."""
    lock = ChatLock.acquire(chat_dir)
    try:
        found = _read(chat_dir)
        missing = _missing(found)
        if not missing:
            return Report()
        copies = _copies_folder(chat_dir)
        edits, fixed = _plan(found, missing, copies.relative_to(chat_dir))
        _copy_aside(chat_dir, edits.files(), copies)
        record_edit(chat_dir, (f.i for f in fixed))  # the windows read them again
        for name in edits.files():
            _rewrite(chat_dir / name, edits.replace.get(name, {}), edits.append.get(name, []))
        # The index no longer matches the files: the next open builds it from the log.
        (chat_dir / INDEX_DIR / META_NAME).unlink(missing_ok=True)
        return Report(fixed, copies)
    finally:
        lock.release()


def needs_repair(chat_dir: Path) -> bool:
    """Whether some id of the log has no record it can read; read only, without the lock, so
    that a running service need not stop to learn there is nothing to do. (A line being
    appended as it reads may look torn: then the repair runs and finds nothing.)"""
    return bool(_missing(_read(chat_dir)))


def _read(chat_dir: Path) -> _Read:
    found = _Read()
    for day in list_day_files(chat_dir / MAIN):
        name = f"{MAIN}/{day}"
        lines: list[tuple[Line, int | None]] = []
        found.order[name] = lines
        data = (chat_dir / name).read_bytes()
        scan = Scan(chat_dir / name)
        for line, record, skip in verdicts(scan):
            counted = None
            if record is None:
                raw = data[line.offset : line.offset + line.length]
                found.bad.append(_Bad(name, line, skip or "damaged", raw))
            elif skip is not None:
                found.lost_pages.setdefault(record.i, (name, line, record))
            elif record.i in found.good:
                first = found.good[record.i][0]
                raise CorruptLog(
                    f"{chat_dir / name} line {line.lineno}: message id {record.i} is also in "
                    f"{chat_dir / first}; a repair cannot tell which one to keep"
                )
            else:
                found.good[record.i] = (name, record)
                counted = record.i
            lines.append((line, counted))
        if scan.torn_lineno is not None:  # the last line, cut: it may be a message's start
            torn = Line(scan.end, len(data) - scan.end, scan.torn_lineno, None, TORN)
            found.bad.append(_Bad(name, torn, TORN, data[scan.end :]))
            lines.append((torn, None))
    return found


def _missing(found: _Read) -> list[int]:
    """Ids below the last readable one that no line counts for: the gaps."""
    top = max(found.good, default=-1)
    return [i for i in range(top) if i not in found.good]


def _plan(found: _Read, missing: list[int], copies: Path) -> tuple[_Edits, list[Fixed]]:
    edits, fixed = _Edits(), []
    used_at: set[tuple[str, int]] = set()  # bad lines already given an id: (file, offset)
    for i in missing:
        if i in found.lost_pages:
            name, line, record = found.lost_pages[i]
            whole = encode_message(
                i, record.kind, record.text, record.date, None, record.images, record.agent
            )
            edits.replace[name][line.offset] = (line.length, whole)
            fixed.append(Fixed(i, "kept", f"{name} line {line.lineno}"))
            continue
        bad = _bad_line_of(found, i, used_at)
        date = _nearest_date(found, i)
        if bad is not None:
            name, line, reason = bad.name, bad.line, bad.reason
            used_at.add((name, line.offset))
            text = (
                f"[damaged] Message {i} could not be read: line {line.lineno} of {name} was "
                f"damaged ({reason}). The file as it was is kept in {copies}."
            )
            edits.replace[name][line.offset] = (line.length, encode_message(i, "note", text, date))
            fixed.append(Fixed(i, "damaged", f"{name} line {line.lineno}"))
            continue
        name = _home_of(found, i)
        text = (
            f"[lost] Message {i} is missing from the log: no day file holds it any more (one "
            "was deleted or cut short), and nothing of it could be recovered."
        )
        edits.append[name].append(encode_message(i, "note", text, date))
        fixed.append(Fixed(i, "lost", name))
    return edits, fixed


def _bad_line_of(found: _Read, i: int, used: set[tuple[str, int]]) -> _Bad | None:
    """The damaged line that held message i: one whose bytes still begin with its id, else the
    first unused one lying between the messages before and after i in the same file."""
    free = [bad for bad in found.bad if (bad.name, bad.line.offset) not in used]
    for bad in free:
        if claimed_id(bad.raw) == i:
            return bad
    for bad in free:
        before, after = _neighbours(found.order[bad.name], bad.line)
        if before is None and after is None:
            continue
        if (before is None or before < i) and (after is None or i < after):
            return bad
    return None


def _neighbours(lines: list[tuple[Line, int | None]], at: Line) -> tuple[int | None, int | None]:
    """The ids counted just before and just after line `at` in its file."""
    before = after = None
    seen = False
    for line, counted in lines:
        if line is at:
            seen = True
        elif counted is not None and not seen:
            before = counted
        elif counted is not None and seen:
            after = counted
            break
    return before, after


def _nearest_date(found: _Read, i: int) -> str:
    """The date of the closest readable message before i, else after it."""
    below = [k for k in found.good if k < i]
    near = max(below) if below else min(found.good)
    return found.good[near][1].date


def _home_of(found: _Read, i: int) -> str:
    """The file of the closest readable message before i (else after it)."""
    below = [k for k in found.good if k < i]
    return found.good[max(below) if below else min(found.good)][0]


def _copies_folder(chat_dir: Path) -> Path:
    stamp = datetime.now().astimezone().strftime("%Y-%m-%dT%H%M%S")
    folder = chat_dir / DAMAGED_DIR / stamp
    n = 1
    while folder.exists():
        folder = chat_dir / DAMAGED_DIR / f"{stamp}-{n}"
        n += 1
    return folder


def _copy_aside(chat_dir: Path, names: list[str], copies: Path) -> None:
    for name in names:
        target = copies / name
        make_dir(target.parent)
        shutil.copyfile(chat_dir / name, target)
        os.chmod(target, 0o600)
        fd = os.open(target, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        fsync_dir(target.parent)


def _rewrite(path: Path, replace: dict[int, tuple[int, bytes]], append: list[bytes]) -> None:
    data = path.read_bytes()
    parts, at = [], 0
    for offset in sorted(replace):
        length, line = replace[offset]
        parts += [data[at:offset], line, b"\n"]
        at = offset + length
    parts.append(data[at:])
    new = b"".join(parts)
    if append:
        rest = new[new.rfind(b"\n") + 1 :]
        if rest:  # a torn last line: end it first (SPEC §1.4)
            new += torn_terminator(rest)
        new += b"".join(line + b"\n" for line in append)
    write_atomic(path, new)
