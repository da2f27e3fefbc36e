"""An open trusts the checkpoint after one stat of each day file: the tails of the files written
since (and of each folder's newest) are read, not those of the days that have kept the size and
time the checkpoint noted, however many; a day file changed since is still noticed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

from evertalk.store import ChatStore
from evertalk.store.checkpoint import INDEX_DIR, REBUILDING
from evertalk.store.meta import Meta, read_meta

DAY0 = datetime(2026, 1, 1, 12, tzinfo=UTC)
DAYS = 30
OLD = DAY0 - timedelta(days=7)


def day_file(chat: Path, folder: str, day: int) -> Path:
    return chat / folder / f"{DAY0 + timedelta(days=day):%Y-%m-%d}.jsonl"


def meta_of(chat: Path) -> Meta:
    meta = read_meta(chat / INDEX_DIR)
    assert isinstance(meta, Meta), meta
    return meta


def long_chat(chat: Path) -> None:
    """DAYS days of messages and leaves, one message and leaf file a day, every file last
    written long ago (as a long chat's old days are), then checkpointed by its owner."""
    with ChatStore.open(chat) as store:
        for day in range(DAYS):
            when = DAY0 + timedelta(days=day)
            for k in range(2):
                i = store.append_message("user", f"day {day} message {k}", date=when)
                store.append_node(0, i, f"user: day {day} message {k}", 1, date=when)
    at = int(OLD.timestamp()) * 10**9
    for folder in ("main", "tree"):
        for path in (chat / folder).iterdir():
            os.utime(path, ns=(at, at))
    with ChatStore.open(chat) as store:
        store.checkpoint()
    assert all(state.seen is not None for state in meta_of(chat).files.values())


OPENS = """
import json, sys
from pathlib import Path
from evertalk.store import ChatStore

chat = Path(sys.argv[1])
opened = []

def hook(event, args):
    if event == "open" and isinstance(args[0], (str, Path)):
        opened.append(str(args[0]))

sys.addaudithook(hook)
with ChatStore.open(chat, readonly=True) as reader:
    count, warnings = reader.message_count, reader.warnings
print(json.dumps({"opened": opened, "count": count, "warnings": warnings}))
"""


def read_open(chat: Path) -> dict[str, object]:
    """A read-only open in a fresh process, with the files it opened (by the open audit event)."""
    run = subprocess.run(
        [sys.executable, "-c", OPENS, str(chat)], capture_output=True, text=True, check=True
    )
    result: dict[str, object] = json.loads(run.stdout)
    return result


def day_files_opened(result: dict[str, object], chat: Path) -> set[str]:
    opened = result["opened"]
    assert isinstance(opened, list)
    paths = [Path(path) for path in opened]
    names = {str(path.relative_to(chat)) for path in paths if path.is_relative_to(chat)}
    return {name for name in names if name.startswith(("main/", "tree/"))}


def test_an_open_reads_no_day_file_but_each_folders_newest(chat: Path) -> None:
    long_chat(chat)
    result = read_open(chat)
    assert (result["count"], result["warnings"]) == (2 * DAYS, [])
    newest = {f"main/{day_file(chat, 'main', DAYS - 1).name}"}
    newest.add(f"tree/{day_file(chat, 'tree', DAYS - 1).name}")
    assert day_files_opened(result, chat) == newest


def test_an_older_day_file_changed_in_place_is_noticed(chat: Path) -> None:
    long_chat(chat)
    path = day_file(chat, "main", 3)
    data = path.read_bytes()
    assert data.count(b"day 3 message 1") == 1
    path.write_bytes(data.replace(b"day 3 message 1", b"day 3 massage 1"))  # same size, new time
    result = read_open(chat)
    warnings = result["warnings"]
    assert isinstance(warnings, list) and len(warnings) == 1
    assert warnings[0].startswith(REBUILDING) and "changed before the point" in warnings[0]
    assert f"main/{path.name}" in day_files_opened(result, chat)
    with ChatStore.open(chat, readonly=True) as reader:
        assert reader.read_message(7).text == "day 3 massage 1"


def test_an_older_day_file_grown_by_an_import_is_read_until_it_settles(chat: Path) -> None:
    long_chat(chat)
    path = day_file(chat, "main", 3)
    with ChatStore.open(chat) as store:  # as an import does: a message of an old date
        store.append_message("user", "imported", date=DAY0 + timedelta(days=3))
        store.checkpoint()
    name = f"main/{path.name}"
    assert meta_of(chat).files[name].seen is None  # just written: its time cannot vouch yet
    assert name in day_files_opened(read_open(chat), chat)
    # Changed again within the same size and time: still read, so still noticed
    stat = path.stat()
    data = path.read_bytes()
    path.write_bytes(data.replace(b'"imported"', b'"imparted"'))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    with ChatStore.open(chat, readonly=True) as reader:
        assert any(w.startswith(REBUILDING) for w in reader.warnings)
        assert reader.read_message(2 * DAYS).text == "imparted"


def test_an_older_day_file_grown_behind_the_checkpoint_is_scanned(chat: Path) -> None:
    long_chat(chat)
    with ChatStore.open(chat) as store:
        line = store.read_message(2 * DAYS - 1)
    assert line.i == 2 * DAYS - 1
    path = day_file(chat, "main", 3)
    record = {"i": 2 * DAYS, "kind": "user", "text": "late", "size": 4}
    record["date"] = (DAY0 + timedelta(days=3)).isoformat()
    with path.open("a") as file:
        file.write(json.dumps(record) + "\n")
    result = read_open(chat)
    assert (result["count"], result["warnings"]) == (2 * DAYS + 1, [])
