"""The derived index: rebuilds, tail scans after crashes, files changed behind its back."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from store_helpers import lock_held

from evertalk.store import ChatStore, index
from evertalk.store.records import encode_message, encode_node

TZ = timezone(timedelta(hours=-5))
DAYS = [datetime(2026, 3, d, 9, 30, tzinfo=TZ) for d in (1, 2, 3)]
Snapshot = Callable[[Path], dict[str, tuple[int, bytes]]]
Crash = Callable[[ChatStore], None]


def state(store: ChatStore) -> dict[str, object]:
    """Everything the index answers, with locations resolved to file names."""
    t = store.message_count
    nodes = {}
    for level, flags in enumerate(store.node_flags()):
        for i, flag in enumerate(flags):
            if flag:
                nodes[(level, i)] = (store.node_location(level, i), store.read_node(level, i))
    return {
        "t": t,
        "messages": [(store.message_location(i), store.read_message(i)) for i in range(t)],
        "sizes": store.node_sizes(),
        "flags": store.node_flags(),
        "nodes": nodes,
    }


def build_chat(store: ChatStore, count: int = 21) -> None:
    """Messages over three days, every leaf, and some parents built out of order."""
    for k in range(count):
        store.append_message("user", f"message {k} " + "é" * k, date=DAYS[k % 3], key=f"key{k}")
    for k in reversed(range(count)):
        store.append_node(0, k, f"user: message {k}", 2 if k % 2 else 1, date=DAYS[k % 3])
    for level, i in [(1, 3), (1, 0), (2, 1), (4, 0), (1, 9), (3, 1)]:
        if (i + 1) << level <= count:
            store.append_node(level, i, f"node {level},{i}", 3 if i == 9 else 1, date=DAYS[i % 3])
    store.checkpoint()  # the index files cover it all: what the tests damage


def test_sizes_and_flags_cover_exactly_the_existing_nodes(chat: Path) -> None:
    with ChatStore.open(chat) as store:
        assert store.node_sizes() == [] and store.node_flags() == []
        build_chat(store)
        assert [len(a) for a in store.node_sizes()] == [21, 10, 5, 2, 1]
        assert [len(a) for a in store.node_flags()] == [21, 10, 5, 2, 1]
        assert store.node_flags()[1][9] == 3 and store.node_sizes()[1][9] == len("node 1,9")
        assert store.node_flags()[1][1] == 0 and store.node_sizes()[1][1] == 0
        assert store.node_sizes()[0][5] == len("user: message 5")
        assert store.read_node(1, 1) is None and store.read_node(9, 0) is None


def test_a_deleted_index_is_rebuilt_identically(chat: Path) -> None:
    with ChatStore.open(chat) as store:
        build_chat(store)
        before = state(store)
    shutil.rmtree(chat / "index")
    with lock_held(chat), ChatStore.open(chat, readonly=True) as reader:
        assert state(reader) == before
    assert not (chat / "index").exists()  # a reader beside the owner built it in memory
    with ChatStore.open(chat) as store:
        assert any("rebuilding the index" in w for w in store.warnings)
        assert state(store) == before
        assert store.append_message("user", "again", key="key7") == 7
    with ChatStore.open(chat) as store:
        assert store.warnings == []
        assert state(store) == before


@pytest.mark.parametrize(
    "damage",
    [
        lambda d: (d / "meta.json").write_text("{not json"),
        lambda d: (d / "meta.json").unlink(),
        lambda d: os.truncate(d / "tree-0.size", 4),
        lambda d: os.truncate(d / "msg.loc", 16 * 5),
        lambda d: (d / "tree-1.flag").unlink(),
        lambda d: (d / "keys.db").write_bytes(b"garbage" * 1000),
    ],
)
def test_a_damaged_index_is_rebuilt_with_a_warning(
    chat: Path, damage: Callable[[Path], object]
) -> None:
    with ChatStore.open(chat) as store:
        build_chat(store)
        before = state(store)
    damage(chat / "index")
    with lock_held(chat), ChatStore.open(chat, readonly=True) as reader:
        assert state(reader) == before
    with ChatStore.open(chat) as store:
        assert any("rebuilding the index" in w for w in store.warnings)
        assert state(store) == before
        assert store.append_message("user", "x", key="key3") == 3


def test_a_log_file_shorter_than_indexed_forces_a_rebuild(chat: Path) -> None:
    with ChatStore.open(chat) as store:
        for k in range(4):
            store.append_message("user", f"m{k}", date=DAYS[0])
        store.checkpoint()
    path = chat / "main" / "2026-03-01.jsonl"
    lines = path.read_bytes().splitlines(keepends=True)
    path.write_bytes(b"".join(lines[:3]))
    with ChatStore.open(chat) as store:
        assert any("shorter" in w for w in store.warnings)
        assert store.message_count == 3


def test_a_crash_after_a_checkpoint_is_repaired_by_the_tail_scan(
    chat: Path, crash: Crash, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(index, "CHECKPOINT_EVERY", 10)
    with ChatStore.open(chat) as store:
        build_chat(store, 8)
    reference = ChatStore.open(chat.parent / "reference")
    build_chat(reference, 8)
    store = ChatStore.open(chat)
    for target in (store, reference):
        for k in range(8, 20):  # past one more checkpoint, then some
            target.append_message("ever", f"late {k}", date=DAYS[1], key=f"key{k}")
        target.append_node(2, 3, "late node", 1, date=DAYS[2])
        target.append_node(0, 15, "late leaf", 2, date=DAYS[0])
        target.append_node(1, 1, "a hole below the checkpoint's count", 1, date=DAYS[2])
        target.append_node(4, 0, "new level", 1, date=DAYS[2])
    crash(store)
    with ChatStore.open(chat) as store:
        assert store.warnings == []  # a tail scan, not a rebuild
        assert store.message_count == 20
        assert store.append_message("ever", "again", key="key19") == 19
        expected = state(reference)
        got = state(store)
        assert got["sizes"] == expected["sizes"] and got["flags"] == expected["flags"]
        assert [m for _, m in got["messages"]] == [m for _, m in expected["messages"]]  # type: ignore[attr-defined]
    reference.close()


_CRASHING_SCRIPT = textwrap.dedent(
    """
    import os, sys
    from pathlib import Path
    from evertalk.store import ChatStore
    store = ChatStore.open(Path(sys.argv[1]))
    for k in range(1005):
        store.append_message("user", f"m{k}", key=f"k{k}")
    store.checkpoint()  # the tree's new day file checkpoints too: make the last one before it
    store.append_message("user", "m1005")
    store.append_node(0, 1003, "user: m1003", 2)
    store.append_node(3, 5, "eight", 1)
    store.append_message("user", "m1006")
    os._exit(0)  # killed: no close, no checkpoint
    """
)


def test_a_killed_process_loses_nothing_it_returned(chat: Path) -> None:
    subprocess.run([sys.executable, "-c", _CRASHING_SCRIPT, str(chat)], check=True)
    meta = (chat / "index" / "meta.json").read_text()
    assert '"messages":1006' in meta  # the last checkpoint
    with ChatStore.open(chat) as store:
        assert store.warnings == []
        assert store.message_count == 1007
        assert store.read_message(1006).text == "m1006"
        assert store.read_node(0, 1003).text == "user: m1003"  # type: ignore[union-attr]
        assert store.read_node(3, 5).text == "eight"  # type: ignore[union-attr]
        assert store.append_message("user", "again", key="k1002") == 1002
        assert [len(f) for f in store.node_flags()][:4] == [1007, 503, 251, 125]
        assert sum(map(sum, store.node_flags())) == 3


def test_a_file_grown_behind_the_index_is_picked_up(chat: Path) -> None:
    with ChatStore.open(chat) as store:
        for k in range(3):
            store.append_message("user", f"m{k}", date=DAYS[0])
        store.append_node(0, 0, "user: m0", 2, date=DAYS[0])
    date = "2026-03-01T09:30:00-05:00"
    with (chat / "main" / "2026-03-01.jsonl").open("ab") as file:
        file.write(encode_message(3, "note", "m3", date) + b"\n")
    (chat / "main" / "2026-03-05.jsonl").write_bytes(encode_message(4, "note", "m4", date) + b"\n")
    with (chat / "tree" / "2026-03-01.jsonl").open("ab") as file:
        file.write(encode_node(0, 4, "note: m4", 2) + b"\n")
    for readonly in (True, False, False):
        with ChatStore.open(chat, readonly=readonly) as store:
            assert store.warnings == []
            assert store.message_count == 5
            assert [store.read_message(i).text for i in range(5)] == [f"m{i}" for i in range(5)]
            assert store.node_flags()[0] == bytearray([2, 0, 0, 0, 2])


def test_a_second_record_for_a_node_is_ignored_with_a_warning(chat: Path) -> None:
    with ChatStore.open(chat) as store:
        for k in range(2):
            store.append_message("user", f"m{k}", date=DAYS[0])
        store.append_node(1, 0, "first", 1, date=DAYS[0])
    path = chat / "tree" / "2026-03-02.jsonl"
    path.write_bytes(encode_node(1, 0, "second, longer", 3) + b"\n")
    for _ in range(2):
        shutil.rmtree(chat / "index", ignore_errors=True)
        with ChatStore.open(chat) as store:
            assert f"{path} line 1: a second record of a node already built; skipped" in (
                store.warnings
            )
            assert store.read_node(1, 0).text == "first"  # type: ignore[union-attr]
            assert store.node_flags()[1][0] == 1 and store.node_sizes()[1][0] == 5


def test_a_record_for_a_node_that_does_not_exist_is_set_aside(chat: Path) -> None:
    with ChatStore.open(chat) as store:
        for k in range(3):
            store.append_message("user", f"m{k}", date=DAYS[0])
        store.append_node(0, 0, "user: m0", 2, date=DAYS[0])
    path = chat / "tree" / "2026-03-01.jsonl"
    kept = path.read_bytes()
    beyond = encode_node(1, 1, "needs message 3", 1) + b"\n" + encode_node(70, 0, "huge", 1) + b"\n"
    path.write_bytes(kept + beyond)
    with ChatStore.open(chat, readonly=True) as store:  # a reader moves nothing
        assert len(store.warnings) == 1 and "2 tree records" in store.warnings[0]
        assert path.read_bytes() == kept + beyond
    with ChatStore.open(chat) as store:
        [warning] = store.warnings
        [moved] = (chat / "quarantine").iterdir()
        assert warning.startswith("2 tree records") and str(moved) in warning
        assert moved.read_bytes() == beyond and path.read_bytes() == kept
        assert moved.stat().st_mode & 0o777 == 0o600
        assert store.node_flags() == [bytearray([2, 0, 0]), bytearray(1)]
        store.append_message("user", "m3", date=DAYS[0])
        assert store.node_flag(1, 1) == 0  # not the record written for another message 3
        store.append_node(1, 1, "now it exists", 1, date=DAYS[0])
        assert store.read_node(1, 1).text == "now it exists"  # type: ignore[union-attr]
    shutil.rmtree(chat / "index")
    with ChatStore.open(chat) as store:
        assert store.warnings == [f"rebuilding the index of {chat}: there is no index yet"]
        assert store.read_node(1, 1).text == "now it exists"  # type: ignore[union-attr]


def test_a_read_only_open_of_a_stale_index_writes_nothing(
    chat: Path, crash: Crash, snapshot: Snapshot
) -> None:
    store = ChatStore.open(chat)
    build_chat(store)
    expected = state(store)
    crash(store)  # leaves index files ahead of meta.json
    (chat / "main" / "2026-03-09.jsonl").write_bytes(b'{"torn')
    before = snapshot(chat)
    with ChatStore.open(chat, readonly=True) as reader:
        assert state(reader) == expected
        assert any("torn" in w for w in reader.warnings)
    assert snapshot(chat) == before


def test_readers_alongside_the_owner_see_consistent_snapshots(
    chat: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(index, "CHECKPOINT_EVERY", 7)
    owner = ChatStore.open(chat)
    readers = []
    for k in range(40):
        owner.append_message("user", f"m{k}", date=DAYS[k % 3])
        if k % 2:
            owner.append_node(0, k, f"user: m{k}", 2, date=DAYS[k % 3])
        if k % 9 == 4:
            readers.append((k + 1, ChatStore.open(chat, readonly=True)))
    for count, reader in readers:
        assert reader.message_count == count  # a snapshot: the log as it was at its open
        assert [reader.read_message(i).text for i in range(count)] == [
            f"m{i}" for i in range(count)
        ]
        assert reader.node_flags()[0] == bytearray(2 if i % 2 else 0 for i in range(count))
    owner.close()
    # The owner's rebuild writes new files under new names: old readers keep theirs.
    (chat / "index" / "meta.json").write_text("damaged")
    with ChatStore.open(chat) as owner:
        assert any("rebuilding" in w for w in owner.warnings)
        owner.append_message("user", "after the rebuild")
    for count, reader in readers:
        assert reader.read_message(count - 1).text == f"m{count - 1}"
        assert reader.read_node(0, 1).text == "user: m1"  # type: ignore[union-attr]
        reader.close()


def test_new_day_files_after_a_checkpoint_keep_their_numbers_across_a_crash(
    chat: Path, crash: Crash
) -> None:
    """Two tree files begun after the last checkpoint, the later day first (a clock that went
    back): the tail scan after a crash must read their records as the run that wrote them did,
    not take one for a second record of a node already built."""
    with ChatStore.open(chat) as store:
        for k in range(4):
            store.append_message("user", f"m{k}", date=DAYS[0])
        store.append_node(0, 3, "user: m3", 2, date=DAYS[0])
        store.checkpoint()
        store.append_node(0, 1, "user: m1", 2, date=DAYS[2])  # a new file, later day
        store.append_node(0, 0, "user: m0", 2, date=DAYS[1])  # a new file, earlier day
        before = state(store)
        crash(store)
    with ChatStore.open(chat) as store:
        assert store.warnings == []
        assert state(store) == before
