"""`chat/held.jsonl`: messages a client was told are accepted, before the log has them (SPEC §6.4).

A message waits before it is logged: for the running turn's next step, or for the settle or
catch-up wait of the turn it opens. It is written here first, one JSON line with an fsync, so that
a crash while it waits loses nothing that a client was told is accepted. Each entry carries a key
that the log keeps with the message, which is how an open tells the entries still to deliver
from those already logged. Once every entry is in the log, the file is emptied.

The torn-line rules of the log hold here too (SPEC §1.4): a torn last line is skipped with a
warning (the write that tore it never returned, so no client was told), and the next write
starts with what ends it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Literal

from evertalk.store.errors import StoreError, describe
from evertalk.store.jsonl import Scan
from evertalk.store.line_files import TERM_NONE
from evertalk.store.secure import fsync_dir, open_file, write_all

HELD_FILE = "held.jsonl"


@dataclass(frozen=True)
class HeldEntry:
    """One waiting message as the file keeps it: images by their names in `chat/images/`."""

    key: str
    kind: Literal["user", "work"]
    text: str
    date: str  # when it was accepted, ISO 8601 with its offset
    images: tuple[str, ...] = ()
    workdir: str | None = None
    agent: str | None = None
    model: str | None = None
    quiet: bool = False  # a stopped subagent's report: it rides with a turn but opens none


class HeldFile:
    """The file of one chat folder, owned by the process that owns the chat."""

    def __init__(self, chat_dir: Path) -> None:
        self.path = chat_dir / HELD_FILE
        self._fd: int | None = None
        self._term = TERM_NONE
        self._keys: list[str] = []  # the keys of the file's entries, oldest first

    def load(self, warnings: list[str]) -> list[HeldEntry]:
        """The file's entries, in order; a line that is not one is skipped with a warning."""
        if not self.path.exists():
            return []
        scan = Scan(self.path, warnings=warnings)
        entries: list[HeldEntry] = []
        try:
            for line in scan:
                entry = _entry(line.record) if line.record is not None else None
                if entry is None:
                    if line.record is not None:
                        warnings.append(f"{self.path} line {line.lineno}: not a held message")
                    continue
                entries.append(entry)
        except OSError as error:
            raise StoreError(f"cannot read the held messages: {describe(error)}") from None
        self._term = scan.term
        self._keys = [entry.key for entry in entries]
        return entries

    def add(self, entry: HeldEntry) -> None:
        """Append the entry and make it durable; StoreError (one line) when it cannot be."""
        line = json.dumps(asdict(entry), ensure_ascii=False, separators=(",", ":"))
        data = self._term + line.encode("utf-8", "surrogatepass") + b"\n"
        try:
            fd = self._open()
            write_all(fd, data)
            os.fsync(fd)
        except OSError as error:
            raise StoreError(f"cannot keep the message: {describe(error)}") from None
        self._term = TERM_NONE
        self._keys.append(entry.key)

    def settle(self, logged: Callable[[str], bool]) -> None:
        """Empty the file once the log holds every entry of it (`logged` tells by key). A file
        that cannot be emptied stays as it is: the next open skips what is logged."""
        if not self._keys or not all(map(logged, self._keys)):
            return
        try:
            fd = self._open()
            os.ftruncate(fd, 0)
            os.fsync(fd)
        except OSError:
            return
        self._keys, self._term = [], TERM_NONE

    def close(self) -> None:
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)

    def _open(self) -> int:
        if self._fd is None:
            self._fd, created = open_file(self.path, os.O_WRONLY | os.O_APPEND)
            if created:  # the name must survive a crash as well as the line
                fsync_dir(self.path.parent)
        return self._fd


def _entry(record: dict[str, Any]) -> HeldEntry | None:
    """The entry on a line, or None when the line is not one this version wrote."""
    key, kind, text, date = (record.get(name) for name in ("key", "kind", "text", "date"))
    if not (isinstance(key, str) and key and kind in ("user", "work")):
        return None
    if not (isinstance(text, str) and isinstance(date, str)):
        return None
    images = record.get("images") or []
    if not isinstance(images, list) or not all(isinstance(name, str) for name in images):
        return None
    optional = {name: record.get(name) for name in ("workdir", "agent", "model")}
    if not all(value is None or isinstance(value, str) for value in optional.values()):
        return None
    return HeldEntry(
        key,
        "user" if kind == "user" else "work",
        text,
        date,
        tuple(images),
        workdir=optional["workdir"],
        agent=optional["agent"],
        model=optional["model"],
        quiet=record.get("quiet") is True,
    )
