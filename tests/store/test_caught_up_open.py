"""A reader whose checkpoint covers the whole log (`evertalk memory status` of a chat its owner
closed) opens the index straight from the checkpoint, without the scanner: the index is the one
a scan of the log's tail, which finds no line, gives, field by field."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from test_index import DAYS, build_chat, state

from evertalk.store import ChatStore
from evertalk.store import scan as scan_module
from evertalk.store.checkpoint import (
    INDEX_DIR,
    Checkpoint,
    LogSizes,
    behind,
    caught_up,
    load_checkpoint,
    log_sizes,
)
from evertalk.store.index import Index
from evertalk.store.loader import open_index
from evertalk.store.tables import OverlayTable, Table


def loaded(chat: Path, sizes: LogSizes) -> Checkpoint:
    base = load_checkpoint(chat / INDEX_DIR, sizes, readonly=True)
    assert isinstance(base, Checkpoint), base
    assert not behind(base.meta, sizes)
    return base


def scanned(chat: Path, sizes: LogSizes) -> tuple[Index, dict[str, bytes], list[str]]:
    """The index as the scanner gives it for the same checkpoint: a tail scan of no lines."""
    warnings: list[str] = []
    base = loaded(chat, sizes)
    index, terms = scan_module._open_index(chat, base, sizes, True, warnings, owner=True)
    return index, terms, warnings


def overlay(table: Table, count: int) -> tuple[object, ...]:
    """What an overlay table answers for its first `count` records and one past them, and how
    it is made (the table below it is a file, opened by each open on its own)."""
    assert isinstance(table, OverlayTable)
    records = [table.get(k) for k in range(count + 1)]
    return type(table.base).__name__, table.width, table.limit, dict(table.changes), records


def fields(index: Index) -> dict[str, object]:
    """Every attribute of the index, its tables and files by what they hold."""
    found: dict[str, object] = dict(vars(index))
    found["msg"] = overlay(index.msg, index.meta.messages)
    found["levels"] = [
        (overlay(level.loc, len(level.flags)), level.sizes, level.flags, level.files)
        for level in index.levels
    ]
    found["keys"] = dict(vars(index.keys))
    files = index.files
    assert files is not None
    found["files"] = (files.dir, files.writable, files.msg is not None, len(files.levels))
    return found


def checkpointed_chat(chat: Path, count: int) -> None:
    """A chat its owner closed: the checkpoint covers every line."""
    with ChatStore.open(chat) as store:
        build_chat(store, count)


@pytest.mark.parametrize("count", [1, 2, 21])
def test_the_index_of_a_caught_up_checkpoint_is_the_scanners(chat: Path, count: int) -> None:
    checkpointed_chat(chat, count)
    # Day files the checkpoint does not know, still empty (created, never written): both opens
    # number them, the message files first, each folder in name order.
    for name in ("main/2026-02-27.jsonl", "main/2026-03-09.jsonl", "tree/2026-02-28.jsonl"):
        (chat / name).touch()
    sizes = log_sizes(chat)
    direct = caught_up(chat, loaded(chat, sizes), sizes)
    by_scan, terms, warnings = scanned(chat, sizes)
    try:
        assert (terms, warnings) == ({}, [])
        assert fields(direct) == fields(by_scan)
        assert set(direct.meta.files) == set(sizes)
    finally:
        direct.close(checkpoint=False)
        by_scan.close(checkpoint=False)


def test_a_reader_of_a_caught_up_chat_answers_as_before(chat: Path) -> None:
    with ChatStore.open(chat) as store:
        build_chat(store)
        before = state(store)
    warnings: list[str] = []
    index, terms = open_index(chat, readonly=True, warnings=warnings)
    index.close(checkpoint=False)
    assert (terms, warnings) == ({}, [])
    with ChatStore.open(chat, readonly=True) as reader:
        assert reader.warnings == []
        assert state(reader) == before


def test_a_reader_behind_the_log_still_scans(chat: Path) -> None:
    with ChatStore.open(chat) as store:
        build_chat(store)
    with (chat / "main" / f"{DAYS[0]:%Y-%m-%d}.jsonl").open("ab") as file:
        file.write(b'{"i": 21, "kind": "user", "te')  # torn: the next line ends it
    with ChatStore.open(chat, readonly=True) as reader:
        assert reader.message_count == 21
        assert any("torn" in warning for warning in reader.warnings)


LOADS = """
import sys
from pathlib import Path
from evertalk.store import ChatStore
with ChatStore.open(Path(sys.argv[1]), readonly=True) as reader:
    print(reader.message_count, "evertalk.store.scan" in sys.modules)
"""


def test_a_caught_up_read_loads_no_scanner(chat: Path) -> None:
    checkpointed_chat(chat, 21)
    run = subprocess.run(
        [sys.executable, "-c", LOADS, str(chat)], capture_output=True, text=True, check=True
    )
    assert run.stdout == "21 False\n"
