"""The other places a forgotten text may lie besides the log, the tree and the search database
(SPEC §12): images, held messages, subagents' logs, and the copies in `damaged/` and
`quarantine/`. Each file that holds the text is rewritten atomically with it replaced."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from evertalk.store.checkpoint import MAIN
from evertalk.store.days import list_day_files
from evertalk.store.held import HELD_FILE
from evertalk.store.secure import fsync_dir, write_atomic

COPY_DIRS = ("damaged", "quarantine", "agents")
"""Folders of the chat whose files may hold copies of messages or summaries."""
IMAGES_DIR = "images"


def scrub_copies(chat_dir: Path, replace: Callable[[str], str], images: list[str]) -> list[Path]:
    """Remove the images no message names any more, and the text from every other copy;
    returns the files rewritten. (The search database is fixed up by the forget itself.)"""
    _drop_unused_images(chat_dir, images)
    rewritten = []
    for path in copy_files(chat_dir):
        if scrub_file(path, replace):
            rewritten.append(path)
    return rewritten


def copy_files(chat_dir: Path) -> Iterator[Path]:
    """Every file that may hold a copy: held messages and the files of COPY_DIRS."""
    held = chat_dir / HELD_FILE
    if held.is_file():
        yield held
    for folder in COPY_DIRS:
        root = chat_dir / folder
        if root.is_dir():
            for path in sorted(root.rglob("*")):
                if path.is_file() and not path.is_symlink():
                    yield path


def holding(chat_dir: Path, replace: Callable[[str], str]) -> list[Path]:
    """The copies that `replace` would change (for the preview)."""
    return [path for path in copy_files(chat_dir) if _scrubbed(path.read_bytes(), replace)]


def scrub_file(path: Path, replace: Callable[[str], str]) -> bool:
    """Rewrite `path` with `replace` applied to every text it holds; whether it changed."""
    new = _scrubbed(path.read_bytes(), replace)
    if new is None:
        return False
    write_atomic(path, new)
    return True


def _scrubbed(data: bytes, replace: Callable[[str], str]) -> bytes | None:
    """The file's bytes with each line's strings replaced (JSON lines keep their shape), or
    None when nothing changes."""
    lines = data.split(b"\n")
    changed = False
    for n, line in enumerate(lines):
        new = _line(line, replace)
        if new != line:
            lines[n], changed = new, True
    return b"\n".join(lines) if changed else None


def _line(line: bytes, replace: Callable[[str], str]) -> bytes:
    text = line.decode("utf-8", errors="surrogateescape")
    try:
        value = json.loads(text)
    except ValueError:
        return replace(text).encode("utf-8", errors="surrogateescape")
    new = _walk(value, replace)
    if new == value:
        return line
    return json.dumps(new, ensure_ascii=False).encode("utf-8")


def _walk(value: Any, replace: Callable[[str], str]) -> Any:
    if isinstance(value, str):
        return replace(value)
    if isinstance(value, list):
        return [_walk(item, replace) for item in value]
    if isinstance(value, dict):
        walked = {key: _walk(item, replace) for key, item in value.items()}
        if isinstance(walked.get("text"), str) and isinstance(walked.get("size"), int):
            walked["size"] = len(walked["text"].encode("utf-8"))  # a record stays well-formed
        return walked
    return value


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
