"""A tree line torn by a full disk is ended at the next owner's open (SPEC §1.4: its bytes stay,
a terminator follows them), so that it is warned about once, not at every open for as long as no
node is written to that day's file again."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from test_index import DAYS, build_chat, state

from evertalk.store import ChatStore
from evertalk.store.records import encode_node

Snapshot = Callable[[Path], dict[str, tuple[int, bytes]]]


def tear(path: Path, record: bytes) -> bytes:
    """What a write cut short by a full disk leaves at the file's end; the bytes written."""
    torn = record[: len(record) // 2]
    with path.open("ab") as file:
        file.write(torn)
    return torn


def test_a_torn_tree_line_is_ended_at_the_next_open(chat: Path, snapshot: Snapshot) -> None:
    with ChatStore.open(chat) as store:
        build_chat(store)
        before = state(store)
    path = chat / "tree" / "2026-03-02.jsonl"  # a day no node is written to any more
    kept = path.read_bytes()
    torn = tear(path, encode_node(1, 8, "a summary the disk had no room for", 1))
    lineno = kept.count(b"\n") + 1
    with ChatStore.open(chat) as store:
        assert store.warnings == [
            f"{path} line {lineno}: the last line is torn (no newline at its end); skipped"
        ]
        assert state(store) == before
    assert path.read_bytes() == kept + torn + b"\n"  # nothing taken away: ended
    for readonly in (True, False, True):
        with ChatStore.open(chat, readonly=readonly) as store:
            assert store.warnings == []
            assert state(store) == before
    with ChatStore.open(chat) as store:  # the next node of that day starts a line of its own
        store.append_node(1, 8, "built after all", 1, date=DAYS[1])
        assert store.read_node(1, 8).text == "built after all"  # type: ignore[union-attr]


def test_a_torn_tree_line_that_parses_is_ended_with_a_hash(chat: Path) -> None:
    with ChatStore.open(chat) as store:
        build_chat(store)
    path = chat / "tree" / "2026-03-02.jsonl"
    kept = path.read_bytes()
    whole = encode_node(1, 8, "only its newline was lost", 1)
    with path.open("ab") as file:
        file.write(whole)
    with ChatStore.open(chat) as store:
        assert store.node_flag(1, 8) == 0  # never written whole: not built
    assert path.read_bytes() == kept + whole + b"#\n"
    with ChatStore.open(chat) as store:
        assert store.warnings == [] and store.node_flag(1, 8) == 0


def test_a_reader_leaves_a_torn_tree_line_to_the_owner(chat: Path, snapshot: Snapshot) -> None:
    with ChatStore.open(chat) as store:
        build_chat(store)
    tear(chat / "tree" / "2026-03-02.jsonl", encode_node(1, 8, "cut short", 1))
    files = snapshot(chat)
    with ChatStore.open(chat, readonly=True) as reader:
        assert any("torn" in w for w in reader.warnings)
    assert snapshot(chat) == files


def test_readers_beside_the_owner_stop_warning_once_a_torn_message_line_is_ended(
    chat: Path,
) -> None:
    """A message line keeps the rule as written (the next append ends it); that append is
    checkpointed at once, so that a reader beside the owner does not warn about it again."""
    with ChatStore.open(chat) as store:
        build_chat(store)
    path = chat / "main" / "2026-03-02.jsonl"
    torn = tear(path, b'{"i": 21, "kind": "user", "text": "the disk was full"}')
    with ChatStore.open(chat) as owner:
        assert any("torn" in w for w in owner.warnings)
        assert path.read_bytes().endswith(torn)  # left to the next append
        owner.append_message("user", "again", date=DAYS[1])
        with ChatStore.open(chat, readonly=True) as reader:
            assert reader.warnings == []
            assert reader.read_message(21).text == "again"
