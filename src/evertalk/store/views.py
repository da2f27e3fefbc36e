"""`chat/view.json`: the saved views (SPEC §3.6). Only the shape is checked here; whether the
views tile the chat and name built nodes is the memory core's to judge."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

from evertalk.memory.core import SavedViews
from evertalk.store.secure import write_atomic

VIEW_NAME = "view.json"

# view.json is derived (an open folds forward from it), so it is saved at checkpoints rather than
# at every message: two fsyncs and a rename per message were most of an append's cost.
SAVE_EVERY = 64
"""Messages after which the views are saved."""
SAVE_AFTER = 2.0
"""Seconds after which views changed since the last save are saved."""


class ViewCheckpoints:
    """When view.json is due: SAVE_EVERY messages, or SAVE_AFTER seconds since the first change
    not yet saved (the owner also saves at a batch's end and at close)."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self.messages = 0
        """Messages since the last save."""
        self._since: float | None = None
        self.pending = False
        """The views changed since the last save."""

    def changed(self, messages: int) -> None:
        self.messages += messages
        self.pending = True
        if self._since is None:
            self._since = self._clock()

    def due(self) -> bool:
        if not self.pending:
            return False
        if self.messages >= SAVE_EVERY:
            return True
        return self._since is not None and self._clock() - self._since >= SAVE_AFTER

    def saved(self) -> None:
        self.messages = 0
        self._since = None
        self.pending = False


_MAX_LEVEL = 62  # a node of a higher level would cover more messages than any log can hold


def encode_views(views: SavedViews) -> bytes:
    obj = {
        "t": views.t,
        "view": [[level, i] for level, i in views.view],
        "cview": None if views.cview is None else [[level, i] for level, i in views.cview],
        "shrinking": views.shrinking,
        "cshrinking": views.cshrinking,
    }
    if views.budget is not None:
        obj["budget"] = list(views.budget)
    return json.dumps(obj, separators=(",", ":")).encode("utf-8") + b"\n"


def save_views(chat_dir: Path, views: SavedViews) -> None:
    """Replace view.json atomically (temporary file, rename), without fsyncs: it is derived. A
    power cut may leave the previous one (the open folds forward from it) or an unreadable one
    (the open folds from message 0 and says so); the log and the nodes it names are durable
    before it is written."""
    write_atomic(chat_dir / VIEW_NAME, encode_views(views), durable=False)


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _pairs(value: Any, what: str) -> list[tuple[int, int]]:
    if not isinstance(value, list):
        raise ValueError(f"{what} is not a list")
    pairs = []
    for item in value:
        if not (isinstance(item, list) and len(item) == 2 and all(map(_is_count, item))):
            raise ValueError(f"{what} holds {json.dumps(item)[:40]}, not an [l, i] pair")
        if item[0] > _MAX_LEVEL:
            raise ValueError(f"{what} names a node of level {item[0]}")
        pairs.append((item[0], item[1]))
    return pairs


def _flag(obj: dict[str, Any], name: str) -> bool:
    value = obj.get(name)
    if not isinstance(value, bool):
        raise ValueError(f"'{name}' is not true or false")
    return value


def parse_views(raw: bytes) -> SavedViews:
    """The views in `raw`; ValueError with a short reason when they are not well formed."""
    obj = json.loads(raw.decode("utf-8"))
    if isinstance(obj, list):
        view = _pairs(obj, "the view")
        return SavedViews(sum(1 << level for level, _ in view), view, None, False, False)
    if not isinstance(obj, dict):
        raise ValueError("neither an object nor a list")
    t = obj.get("t")
    if not isinstance(t, int) or not _is_count(t):
        raise ValueError("'t' is not a count")
    cview = obj.get("cview")
    return SavedViews(
        t,
        _pairs(obj.get("view"), "'view'"),
        None if cview is None else _pairs(cview, "'cview'"),
        _flag(obj, "shrinking"),
        _flag(obj, "cshrinking"),
        _budget(obj.get("budget")),
    )


def _budget(value: object) -> tuple[int, int, int, int] | None:
    """The four sizes of `budget` (absent in files written before it was recorded)."""
    if value is None:
        return None
    if not (isinstance(value, list) and len(value) == 4 and all(map(_is_count, value))):
        raise ValueError("'budget' is not four sizes")
    ceiling, floor, cceiling, cfloor = value
    if floor > ceiling or cfloor > cceiling:
        raise ValueError("'budget' has a floor over its ceiling")
    return ceiling, floor, cceiling, cfloor


def load_views(chat_dir: Path) -> SavedViews | str | None:
    """The saved views; None when there are none; an error string when the file is unreadable."""
    path = chat_dir / VIEW_NAME
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as error:
        return f"{path}: cannot read it ({error.strerror})"
    try:
        return parse_views(raw)
    except (ValueError, RecursionError) as error:
        return f"{path}: {error}"
