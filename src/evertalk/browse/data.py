"""What the browse page shows, as JSON-ready dicts, read from a chat opened read-only.

The chat may be one a running service writes: each answer first checks (at most twice a
second) whether the log, the tree or view.json changed on disk, and opens the chat again
then, so the page follows it. Only what is asked is read: the view's few hundred lines, the
two children of one node, one message; never the whole history.
"""

from __future__ import annotations

import os
import re
import threading
import time
from dataclasses import asdict
from pathlib import Path
from typing import Any

from evertalk.chat import Chat, ToolInputError, format_date
from evertalk.image_files import MAX_IMAGE_BYTES, sniff
from evertalk.memory import Node
from evertalk.memory.text import flatten
from evertalk.memory.tree import UNBUILT, Tree
from evertalk.store.compactor_status import catch_up_seconds, read_status
from evertalk.store.errors import StoreError

IMAGE_NAME = re.compile(r"[0-9a-f]{64}\.(?:png|jpg|jpeg|gif|webp)")
CHECK_SECONDS = 0.5
"""How stale an answer may be: the files are looked at again after this long."""

Json = dict[str, Any]


class BadRequest(ValueError):
    """A request the page should not have made; the text is one line."""


def line_of(node: Node, text: str | None, size: int) -> Json:
    """One line of a view or of a zoom: its name's parts, level, bytes and flattened text
    (None for an unbuilt leaf, which the page shows as the placeholder)."""
    level, index = node
    return {
        "id": index << level,
        "n": 1 << level,
        "level": level,
        "bytes": size,
        "text": None if text is None else flatten(text),
    }


def summarizing(tree: Tree) -> Json | None:
    """The stretch of the chat still being summarized: from the first message under a node not
    built yet to the last message; None when every node is built."""
    starts = [row.find(UNBUILT) << level for level, row in enumerate(tree.flags)]
    found = [start for start in starts if start >= 0]
    if not found:
        return None
    return {"first": min(found), "last": tree.t - 1, "unbuilt": tree.unbuilt_count()}


class ChatData:
    def __init__(self, chat_dir: Path, check_seconds: float = CHECK_SECONDS) -> None:
        self.chat_dir = chat_dir
        self.check_seconds = check_seconds
        self._lock = threading.Lock()
        self._chat = Chat.open(chat_dir, readonly=True)
        self._seen = _signature(chat_dir)
        self._checked = -float("inf")

    def close(self) -> None:
        with self._lock:
            self._chat.close()

    @property
    def warnings(self) -> list[str]:
        return list(self._chat.warnings)

    def _current(self) -> Chat:
        """The chat, opened again if its files changed since it was opened."""
        now = time.monotonic()
        if now - self._checked < self.check_seconds:
            return self._chat
        self._checked = now
        seen = _signature(self.chat_dir)
        if seen != self._seen:
            fresh = Chat.open(self.chat_dir, readonly=True)
            self._chat.close()
            self._chat, self._seen = fresh, seen
        return self._chat

    def t(self) -> int:
        with self._lock:
            return self._current().t

    def view(self) -> Json:
        with self._lock:
            chat = self._current()
            core = chat.core
            tree = core.tree
            lines = [line_of(node, chat.text_of(node), tree.line_size(node)) for node in core.view]
            cview = [[level, index] for level, index in core.cview]
            return {"t": chat.t, "lines": lines, "cview": cview, "bytes": core.view.size}

    def zoom(self, start: int, count: int) -> Json:
        """A node's two children, or (count 1) the message itself, with its date and images."""
        with self._lock:
            chat = self._current()
            try:
                level, index = chat.zoom_node(start, count)
            except ToolInputError as error:
                raise BadRequest(str(error)) from None
            if count == 1:
                return {"t": chat.t, "message": self._message(chat, start)}
            tree = chat.core.tree
            children = [(level - 1, 2 * index), (level - 1, 2 * index + 1)]
            lines = [
                line_of(child, chat.text_of(child), tree.line_size(child)) for child in children
            ]
            return {"t": chat.t, "children": lines}

    @staticmethod
    def _message(chat: Chat, i: int) -> Json:
        record = chat.record(i)
        return {
            "id": i,
            "kind": record.kind,
            "text": record.text,
            "bytes": record.size,
            "date": format_date(record.date),
            "images": list(record.images or ()),
            "agent": record.agent,
        }

    def date(self, i: int) -> Json:
        with self._lock:
            try:
                return {"id": i, "date": self._current().date(i)}
            except ToolInputError as error:
                raise BadRequest(str(error)) from None

    def status(self) -> Json:
        with self._lock:
            chat = self._current()
            core = chat.core
            status = {**asdict(chat.status()), "path": str(chat.folder)}
            live = read_status(self.chat_dir)
            catch_up = core.catch_up()
            eta = catch_up_seconds(catch_up.to_go, live.rate if live else None)
            return {
                **status,
                "budget": list(core.budget.sizes()),
                "catch_up": {**asdict(catch_up), "eta_seconds": round(eta, 2)},
                "compactor": asdict(live) if live else None,
                "summarizing": summarizing(core.tree),
            }

    def image(self, name: str) -> tuple[str, bytes]:
        """An image of the chat's images folder: (media type, bytes). Only names as the chat
        gives them (a hash and an extension), so no other file can be asked for."""
        if not IMAGE_NAME.fullmatch(name):
            raise BadRequest("not an image of this chat")
        path = self.chat_dir / "images" / name
        try:
            if path.stat().st_size > MAX_IMAGE_BYTES:
                raise BadRequest(f"image larger than {MAX_IMAGE_BYTES:,} bytes")
            data = path.read_bytes()
        except OSError:
            raise BadRequest("no such image") from None
        media_type = sniff(data)
        if media_type is None:
            raise BadRequest("not a PNG, JPEG, GIF or WebP image")
        return media_type, data


def _signature(chat_dir: Path) -> tuple[object, ...]:
    """What changes when the owner writes: the newest day file of the log and of the tree
    (appends go there), how many there are, and view.json. A few stats, not a read."""
    parts: list[object] = []
    for folder in ("main", "tree"):
        try:
            names = sorted(entry.name for entry in os.scandir(chat_dir / folder))
        except OSError:
            names = []
        parts.append(len(names))
        parts.append(file_stamp(chat_dir / folder / names[-1]) if names else None)
    parts.append(file_stamp(chat_dir / "view.json"))
    return tuple(parts)


def file_stamp(path: Path) -> tuple[int, int] | None:
    """A file's (size, modification time), None when it is not there: whether it changed."""
    try:
        info = path.stat()
    except OSError:
        return None
    return info.st_size, info.st_mtime_ns


__all__ = ["BadRequest", "ChatData", "StoreError", "file_stamp", "line_of", "summarizing"]
