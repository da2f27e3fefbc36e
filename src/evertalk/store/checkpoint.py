"""The index as its last checkpoint left it: meta.json, the index files and the keys, loaded and
checked against the log. Every open starts here; an index whose checkpoint covers the whole log
is used as it is (`caught_up`), and scan.py reads whatever the log holds past it.
"""

from __future__ import annotations

import os
import sqlite3
from dataclasses import dataclass
from pathlib import Path

from evertalk.store import keys
from evertalk.store.days import day_entries
from evertalk.store.index import Index, Level
from evertalk.store.index_files import IndexFiles, StaleIndex
from evertalk.store.meta import META_NAME, Meta, read_build, read_meta, tails_changed
from evertalk.store.tables import OverlayTable

INDEX_DIR = "index"
MAIN, TREE = "main", "tree"

REBUILDING = "rebuilding the index of"
"""How the warning of a rebuild begins: the one warning that says nothing of damage."""


class LogSizes(dict[str, int]):
    """The size of every day file of the log and of the tree, by name relative to the chat
    folder; `stats` adds their modification times, `newest` names each folder's last file."""

    def __init__(self) -> None:
        super().__init__()
        self.stats: dict[str, tuple[int, int]] = {}
        self.newest: set[str] = set()


def log_sizes(chat_dir: Path) -> LogSizes:
    """One listing of each folder and one stat of each day file."""
    sizes = LogSizes()
    for folder in (MAIN, TREE):
        name = ""
        for entry in day_entries(chat_dir / folder):
            stat = entry.stat()
            name = f"{folder}/{entry.name}"
            sizes[name] = stat.st_size
            sizes.stats[name] = (stat.st_size, stat.st_mtime_ns)
        if name:
            sizes.newest.add(name)
    return sizes


def behind(meta: Meta, sizes: dict[str, int]) -> bool:
    """Whether the log holds lines the checkpoint does not cover (a scan has work to do)."""
    return any(
        size != (meta.files[name].scanned if name in meta.files else 0)
        for name, size in sizes.items()
    )


@dataclass(slots=True)
class Checkpoint:
    """The checkpointed index, loaded: what a scan of the log's tail starts from."""

    meta: Meta
    files: IndexFiles
    levels: list[Level]
    keys: keys.KeyStore

    def close(self) -> None:
        self.keys.close()
        self.files.close()


def _stat(path: Path) -> os.stat_result | None:
    try:
        return os.stat(path)
    except OSError:
        return None


def _same_build(index_dir: Path, before: os.stat_result | None, meta: Meta) -> bool:
    """Whether meta.json still holds `meta`'s build: unchanged since `before` (a rewrite
    replaces the file), or read again."""
    now = _stat(index_dir / META_NAME)
    if before is not None and now is not None:
        fields = ("st_dev", "st_ino", "st_size", "st_mtime_ns", "st_ctime_ns")
        if all(getattr(before, name) == getattr(now, name) for name in fields):
            return True
    return read_build(index_dir) == meta.build


def _load_levels(files: IndexFiles, meta: Meta, checkpointed: int) -> list[Level]:
    """Each level's sizes and flags, checked when their files were written since meta.json.

    A checkpoint writes meta.json after the files, and a clean close checkpoints, so files
    written later were either left by a crash or changed by something else; only those are
    worth checking value by value, which costs milliseconds on a chat of a million messages.
    (Written in the same tick of the file system's clock counts as later: checking more is safe.)
    """
    levels = []
    for level, (level_files, count) in enumerate(zip(files.levels, meta.levels, strict=True)):
        check = level_files.written_ns() >= checkpointed
        sizes, flags = level_files.load(level, count, check=check)
        levels.append(Level(OverlayTable(level_files.loc, count), sizes, flags))
    return levels


def load_checkpoint(index_dir: Path, sizes: LogSizes, readonly: bool) -> Checkpoint | str:
    """The checkpointed index, or the reason it cannot be used."""
    before = _stat(index_dir / META_NAME)  # before the read: a rewrite then checks more
    checkpointed = before.st_mtime_ns if before is not None else 0
    meta = read_meta(index_dir)
    if not isinstance(meta, Meta):
        return meta or "there is no index yet"
    for name, state in meta.files.items():
        if sizes.get(name, -1) < state.scanned:
            return f"{name} is missing or shorter than when it was indexed"
    if any(count > meta.messages >> level for level, count in enumerate(meta.levels)):
        return "meta.json counts nodes that cannot exist"
    changed = tails_changed(meta, index_dir.parent, sizes.stats, sizes.newest)
    if changed is not None:
        return f"{changed} changed before the point it was indexed up to"
    if not readonly and not (index_dir / keys.KEYS_NAME).is_file():
        return "keys.db is missing"
    try:
        files = IndexFiles.open(index_dir, meta, writable=not readonly)
    except StaleIndex as error:
        return str(error)
    except OSError as error:
        return f"cannot open it ({error.strerror})"
    try:
        levels = _load_levels(files, meta, checkpointed)
        conn = None if readonly else keys.connect(index_dir / keys.KEYS_NAME)
        key_store = keys.KeyStore(conn, meta.messages, track=not readonly)
    except StaleIndex as error:
        files.close()
        return str(error)
    except (OSError, sqlite3.Error) as error:
        files.close()
        return f"cannot read it ({error})"
    # A reader shares the files with their owner, whose rebuild would replace meta.json first.
    if readonly and not _same_build(index_dir, before, meta):
        key_store.close()
        files.close()
        return "the index was rebuilt while it was read"
    return Checkpoint(meta, files, levels, key_store)


def caught_up(chat_dir: Path, checkpoint: Checkpoint, sizes: dict[str, int]) -> Index:
    """A read-only index over a checkpoint that covers every line of the log (`behind` is
    False): the index a scan of the log's tail would give, with no tail to read.

    As that scan does, it numbers the log's files the checkpoint does not know yet (they are
    empty), the message files first, in name order, then the tree's; and it lays the locations
    over the files, counting only the checkpoint's records.
    """
    try:
        meta = checkpoint.meta
        for folder in (MAIN, TREE):
            for name in sorted(name for name in sizes if name.startswith(folder + "/")):
                meta.entry(name)
        msg = OverlayTable(checkpoint.files.msg_table(), meta.messages)
        return Index(chat_dir, meta, msg, checkpoint.levels, checkpoint.keys, checkpoint.files)
    except BaseException:
        checkpoint.close()
        raise
