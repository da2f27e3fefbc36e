"""The index is derived data: a log edited by hand, or index files overwritten, must never make a
chat unusable. The open that notices rebuilds the index from the log; so does a read that finds
it wrong, which then goes on; only what cannot be repaired in the process is a one-line error,
and then the next open rebuilds."""

from __future__ import annotations

import hashlib
import os
import random
from array import array
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from store_helpers import lock_held
from test_index import DAYS, build_chat

from evertalk.store import ChatStore, CorruptLog, StoreError
from evertalk.store.errors import IndexMismatch
from evertalk.store.index_files import SIZE_CODE, sizes_fit
from evertalk.store.meta import TAIL, tail_hash
from evertalk.store.records import decode_node, encode_node


def content(store: ChatStore) -> dict[str, object]:
    """What the index answers, without where the lines are (an edit moves them)."""
    nodes = {}
    for level, flags in enumerate(store.node_flags()):
        for i, flag in enumerate(flags):
            if flag:
                nodes[(level, i)] = store.read_node(level, i)
    return {
        "t": store.message_count,
        "messages": [store.read_message(i) for i in range(store.message_count)],
        "sizes": store.node_sizes(),
        "flags": store.node_flags(),
        "nodes": nodes,
    }


def first_file(chat: Path, folder: str) -> Path:
    return sorted((chat / folder).iterdir())[0]


def insert_line(path: Path, lineno: int, data: bytes) -> None:
    """What `sed -i 'Ni DATA'` does."""
    lines = path.read_bytes().splitlines(keepends=True)
    lines.insert(lineno - 1, data + b"\n")
    path.write_bytes(b"".join(lines))


def overwrite(path: Path, offset: int, data: bytes) -> None:
    """What `dd conv=notrunc` does."""
    fd = os.open(path, os.O_WRONLY)
    try:
        os.pwrite(fd, data, offset)
    finally:
        os.close(fd)


def noise(count: int, seed: int = 7) -> bytes:
    return random.Random(seed).randbytes(count)


@pytest.fixture
def built(chat: Path) -> dict[str, object]:
    with ChatStore.open(chat) as store:
        build_chat(store)
        return content(store)


# -- lines put into the log ------------------------------------------------------------------


@pytest.mark.parametrize("folder", ["main", "tree"])
def test_a_line_put_into_a_log_file_rebuilds_the_index_at_open(
    chat: Path, built: dict[str, object], folder: str
) -> None:
    path = first_file(chat, folder)
    insert_line(path, 3, b"GARBAGE")
    for readonly in (True, False):
        with ChatStore.open(chat, readonly=readonly) as store:
            assert any(w.startswith("rebuilding the index") for w in store.warnings)
            assert f"{path} line 3: not valid JSON; skipped" in store.warnings
            assert content(store) == built
    with ChatStore.open(chat) as store:  # the writable open saved the rebuilt index
        assert store.warnings == []
        assert content(store) == built
        store.append_message("user", "after", date=DAYS[0])


def test_a_line_as_long_as_the_last_one_is_no_duplicate_id(chat: Path) -> None:
    """The indexed end then falls on a line boundary, and the tail seems to repeat an id."""
    with ChatStore.open(chat) as store:
        for k in range(5):
            store.append_message("user", f"message {k}", date=DAYS[0])
        store.checkpoint()
    path = first_file(chat, "main")
    last = path.read_bytes().splitlines()[-1]
    insert_line(path, 2, b"x" * len(last))
    with ChatStore.open(chat) as store:
        assert any("rebuilding the index" in w for w in store.warnings)
        assert [store.read_message(k).text for k in range(5)] == [f"message {k}" for k in range(5)]


def test_a_real_duplicate_id_still_stops_the_open(chat: Path) -> None:
    with ChatStore.open(chat) as store:
        for k in range(3):
            store.append_message("user", f"message {k}", date=DAYS[0])
    path = first_file(chat, "main")
    with path.open("ab") as file:
        file.write(path.read_bytes().splitlines(keepends=True)[1])
    for _ in range(2):
        with pytest.raises(CorruptLog, match="message id 1 is a duplicate"):
            ChatStore.open(chat)


# -- a read that finds the index wrong -------------------------------------------------------


def four_free_leaves(chat: Path, more: int = 0) -> Path:
    """Four messages and their leaves, one tree line each, all of the same length; `more`
    messages and leaves after them put those lines far from the files' ends."""
    with ChatStore.open(chat) as store:
        for k in range(4 + more):
            store.append_message("user", f"m{k}", date=DAYS[0])
        for k in range(4):
            store.append_node(0, k, f"user: m{k}", 2, date=DAYS[0])
        for k in range(4, 4 + more):
            store.append_node(0, k, f"user: m{k} " + "p" * 200, 2, date=DAYS[0])
        store.checkpoint()
    return first_file(chat, "tree")


def test_lines_swapped_near_a_files_end_are_noticed_at_open(chat: Path) -> None:
    path = four_free_leaves(chat)
    lines = path.read_bytes().splitlines(keepends=True)
    lines[0], lines[1] = lines[1], lines[0]  # same size: only the bytes tell
    path.write_bytes(b"".join(lines))
    with ChatStore.open(chat) as store:
        [warning] = store.warnings
        assert "tree/2026-03-01.jsonl changed before the point it was indexed" in warning
        assert store.read_node(0, 0).text == "user: m0"  # type: ignore[union-attr]
    with ChatStore.open(chat) as store:
        assert store.warnings == []


def test_the_tail_hash_is_hashlibs_blake2b(tmp_path: Path) -> None:
    """meta.json keeps the hashes: a checkpoint written by any version must still check out."""
    path = tmp_path / "day.jsonl"
    path.write_bytes(bytes(range(256)) * 20)
    for end in (1, 100, TAIL, 5000):
        expected = hashlib.blake2b(path.read_bytes()[max(0, end - TAIL) : end], digest_size=8)
        assert tail_hash(path, end) == expected.hexdigest()


@pytest.mark.parametrize("readonly", [True, False])
def test_a_read_that_finds_the_index_wrong_rebuilds_it_and_goes_on(
    chat: Path, readonly: bool
) -> None:
    path = four_free_leaves(chat, more=40)
    lines = path.read_bytes().splitlines(keepends=True)
    # same size, and more than the open's check of each file's last bytes away from the end
    lines[0], lines[1] = lines[1], lines[0]
    path.write_bytes(b"".join(lines))
    with ChatStore.open(chat, readonly=readonly) as store:
        assert store.warnings == []
        assert store.read_node(0, 0).text == "user: m0"  # type: ignore[union-attr]
        assert store.read_node(0, 1).text == "user: m1"  # type: ignore[union-attr]
        assert any("does not match the log at node (0, 0)" in w for w in store.warnings)
        assert store.stale is None  # same nodes, same sizes: nothing a caller holds changed
        if not readonly:
            assert store.append_message("user", "m44", date=DAYS[0]) == 44
    for _ in range(2):  # a reader cannot save the rebuilt index: the owner does, once
        with ChatStore.open(chat) as store:
            assert store.read_node(0, 0).text == "user: m0"  # type: ignore[union-attr]
            mismatch = any("does not match" in w for w in store.warnings)
    assert not mismatch


def test_a_rebuild_that_loses_a_node_makes_the_store_stale_until_resynced(chat: Path) -> None:
    path = four_free_leaves(chat, more=40)
    lines = path.read_bytes().splitlines(keepends=True)
    lines[1] = b"x" * (len(lines[1]) - 1) + b"\n"  # node (0, 1) is gone; the size is the same
    path.write_bytes(b"".join(lines))
    with ChatStore.open(chat) as store:
        assert store.read_node(0, 1) is None  # read again from the rebuilt index
        assert store.stale is not None and "rebuilt from the log" in store.stale
        assert store.node_flags()[0] == bytearray([2, 0, 2, 2] + [2] * 40)
        with pytest.raises(StoreError, match="must be reopened: its index was rebuilt"):
            store.append_message("user", "m4", date=DAYS[0])
        store.resync()  # the caller took sizes and flags again
        store.append_node(0, 1, "user: m1", 2, date=DAYS[0])
    with ChatStore.open(chat) as store:
        assert store.read_node(0, 1).text == "user: m1"  # type: ignore[union-attr]


def test_a_mismatch_after_the_rebuild_is_an_error_and_the_next_open_rebuilds(chat: Path) -> None:
    path = four_free_leaves(chat, more=40)
    lines = path.read_bytes().splitlines(keepends=True)
    lines[0], lines[1] = lines[1], lines[0]
    path.write_bytes(b"".join(lines))
    store = ChatStore.open(chat)
    assert store.read_node(0, 0) is not None  # the first mismatch: rebuilt in place
    lines = path.read_bytes().splitlines(keepends=True)
    lines[2], lines[3] = lines[3], lines[2]
    path.write_bytes(b"".join(lines))
    with pytest.raises(IndexMismatch) as caught:
        store.read_node(0, 2)
    message = str(caught.value)
    assert "\n" not in message and message.endswith("rebuilt from the log at the next start")
    with pytest.raises(StoreError, match="must be reopened"):
        store.append_message("user", "m4", date=DAYS[0])
    store.close()
    assert not (chat / "index" / "meta.json").exists()  # no checkpoint vouches for it now
    with ChatStore.open(chat) as store:
        assert any("rebuilding the index" in w for w in store.warnings)
        assert [store.read_node(0, k).text for k in range(4)] == [  # type: ignore[union-attr]
            f"user: m{k}" for k in range(4)
        ]


def test_a_log_that_lost_a_message_stops_at_the_rebuild_with_one_line(chat: Path) -> None:
    with ChatStore.open(chat) as store:
        for k in range(4):
            store.append_message("user", f"m{k}", date=DAYS[0])
    path = first_file(chat, "main")
    lines = path.read_bytes().splitlines(keepends=True)
    lines[1] = b"x" * (len(lines[1]) - 1) + b"\n"
    path.write_bytes(b"".join(lines))
    with pytest.raises(CorruptLog) as caught:  # SPEC §1.2: a gap; the open sees the change
        ChatStore.open(chat)
    why = f"{path} line 2: not valid JSON, so message 1 cannot be read"
    assert why in str(caught.value) and "\n" not in str(caught.value)
    assert "evertalk memory repair" in str(caught.value)


def test_a_message_garbled_far_from_a_files_end_fails_at_its_read_with_one_line(
    chat: Path,
) -> None:
    with ChatStore.open(chat) as store:
        for k in range(40):
            store.append_message("user", f"m{k} " + "p" * 200, date=DAYS[0])
        store.checkpoint()
    path = first_file(chat, "main")
    lines = path.read_bytes().splitlines(keepends=True)
    lines[1] = b"x" * (len(lines[1]) - 1) + b"\n"
    path.write_bytes(b"".join(lines))
    with ChatStore.open(chat) as store, pytest.raises(StoreError) as caught:
        store.read_message(1)
    assert "message 1 cannot be read" in str(caught.value) and "\n" not in str(caught.value)


# -- index files overwritten -----------------------------------------------------------------


def _copy_first_location(index_dir: Path, name: str) -> None:
    """Record 5 points at record 0's line: a location in range, on another record."""
    data = (index_dir / name).read_bytes()
    overwrite(index_dir / name, 16 * 5, data[:16])


@pytest.mark.parametrize(
    "damage",
    [
        lambda d: overwrite(d / "msg.loc", 16, noise(64)),
        lambda d: overwrite(d / "tree-0.loc", 16, noise(64)),
        lambda d: overwrite(d / "tree-1.loc", 0, noise(64)),
        lambda d: _copy_first_location(d, "msg.loc"),
        lambda d: _copy_first_location(d, "tree-0.loc"),
    ],
)
def test_a_damaged_location_is_caught_by_the_read_that_uses_it(
    chat: Path, built: dict[str, object], damage: object
) -> None:
    assert callable(damage)
    damage(chat / "index")
    for readonly in (True, False):
        with ChatStore.open(chat, readonly=readonly) as store:
            assert content(store) == built
            assert any("does not match the log" in w for w in store.warnings)
    with ChatStore.open(chat) as store:
        assert store.warnings == []
        assert content(store) == built


@pytest.mark.parametrize("name", ["tree-0.size", "tree-1.size", "tree-0.flag", "tree-2.flag"])
def test_impossible_sizes_or_flags_rebuild_the_index_at_open(
    chat: Path, built: dict[str, object], name: str
) -> None:
    overwrite(chat / "index" / name, 0, b"\xff" * 8)
    with lock_held(chat), ChatStore.open(chat, readonly=True) as store:  # beside the owner
        assert any(f"{name} holds" in w for w in store.warnings)
        assert content(store) == built
    with ChatStore.open(chat) as store:
        assert any(f"{name} holds" in w for w in store.warnings)
        assert content(store) == built
    with ChatStore.open(chat) as store:
        assert store.warnings == []


def test_a_node_flagged_built_without_a_location_is_caught(chat: Path) -> None:
    four_free_leaves(chat)
    with ChatStore.open(chat) as store:
        store.append_message("user", "m4", date=DAYS[0])  # leaf 4 exists, unbuilt
    overwrite(chat / "index" / "tree-0.flag", 4, b"\x01")
    with ChatStore.open(chat) as store:
        assert store.read_node(0, 4) is None
        assert store.node_flags()[0][4] == 0


# -- what makes a size impossible ------------------------------------------------------------


def test_a_node_line_holds_at_most_512_bytes(chat: Path) -> None:
    assert decode_node({"l": 0, "i": 0, "text": "a" * 512, "size": 512}) is not None
    assert decode_node({"l": 0, "i": 0, "text": "a" * 513, "size": 513}) is None
    with pytest.raises(ValueError, match="at most 512 bytes"):
        encode_node(0, 0, "é" * 257, 1)
    with ChatStore.open(chat) as store:
        store.append_message("user", "m0", date=DAYS[0])
        with pytest.raises(ValueError, match="at most 512 bytes"):
            store.append_node(0, 0, "a" * 513, 1)
        assert store.read_node(0, 0) is None
    path = chat / "tree" / "2026-03-01.jsonl"
    path.write_text('{"l": 0, "i": 0, "text": "' + "a" * 600 + '", "size": 600}\n')
    with ChatStore.open(chat) as store:
        assert f"{path} line 1: not a valid tree record; skipped" in store.warnings
        assert store.node_flags()[0][0] == 0


@pytest.mark.parametrize("size", [0, 255, 256, 511, 512, 513, 767, 768, 1023, 65_536, 2**32 - 1])
def test_sizes_fit_at_the_boundaries(size: int) -> None:
    fits = size <= 512
    for values in ([size], [300, size, 512], [512] * 5 + [size]):
        assert sizes_fit(array(SIZE_CODE, values).tobytes()) is fits


@given(st.lists(st.integers(0, 2**32 - 1) | st.integers(0, 600), max_size=40))
def test_sizes_fit_is_the_maximum_at_most_512(values: list[int]) -> None:
    assert sizes_fit(array(SIZE_CODE, values).tobytes()) is (max(values, default=0) <= 512)
