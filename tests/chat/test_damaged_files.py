"""A chat whose files were damaged by hand still opens and goes on: a line put into or garbled in a
log file, a tree record lost under a parent that remains, index files overwritten."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

from evertalk.chat import Chat
from evertalk.memory.tree import BUILT, FREE

LONG = "the restore drill took forty minutes; " * 20  # over 512 bytes: its leaf is not free


def make_chat(tmp_path: Path) -> Path:
    """The reviewer's shape: leaves 0-2 summarized, leaf 3 free; (1, 0), (1, 1), (2, 0) free."""
    chat_dir = tmp_path / "chat"
    with Chat.open(chat_dir) as chat:
        for kind, text in [("user", LONG), ("ever", LONG), ("user", LONG), ("ever", "ok reply")]:
            chat.append(kind, text)
        for index in range(3):
            chat.build((0, index), f"summary {index} " + "s" * 150)
        chat.append("user", "one more")
        assert chat.core.tree.flags[2] == bytearray([FREE])
        chat.store.checkpoint()  # the index files cover it all: what the tests damage
    return chat_dir


def tree_file(chat_dir: Path) -> Path:
    [path] = (chat_dir / "tree").iterdir()
    return path


def records(chat_dir: Path) -> list[tuple[int, int]]:
    """The nodes of the tree file's records, in file order (lines that are not JSON left out)."""
    nodes = []
    for line in tree_file(chat_dir).read_text().splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        nodes.append((record["l"], record["i"]))
    return nodes


def replace_record(chat_dir: Path, node: tuple[int, int], new: str) -> None:
    """What `sed -i 'Ns/.*/garbage line/'` does to the line of `node`."""
    path = tree_file(chat_dir)
    lines = path.read_text().splitlines(keepends=True)
    at = records(chat_dir).index(node)
    lines[at] = new + "\n"
    path.write_text("".join(lines))


def state(chat: Chat) -> tuple[object, ...]:
    core = chat.core
    return (core.saved(), [bytes(row) for row in core.tree.flags], chat.render_view())


def test_a_lost_free_leaf_under_a_built_parent_is_written_again(tmp_path: Path) -> None:
    chat_dir = make_chat(tmp_path)
    with Chat.open(chat_dir, readonly=True) as chat:
        before = state(chat)
        parent = chat.text_of((1, 1))
    replace_record(chat_dir, (0, 3), "garbage line")
    with Chat.open(chat_dir, readonly=True) as chat:  # `memory status`, `zoom`: no KeyError
        assert chat.status().unbuilt == 0
        assert chat.zoom(0, 4).splitlines()[1] == f"2+2|{parent}".replace("\n", " ")
    with Chat.open(chat_dir) as chat:
        assert any("not valid JSON; skipped" in w for w in chat.warnings)
        assert chat.text_of((0, 3)) == "ever: ok reply"
        assert chat.text_of((1, 1)) == parent  # built once: kept as it was
        assert state(chat) == before
        chat.append("ever", "and on it goes")
    assert records(chat_dir).count((0, 3)) == 1 and records(chat_dir).count((1, 1)) == 1
    with Chat.open(chat_dir) as chat:
        assert chat.warnings == []
        assert chat.t == 6


def test_a_lost_model_leaf_under_a_built_parent_is_summarized_again_alone(tmp_path: Path) -> None:
    chat_dir = make_chat(tmp_path)
    replace_record(chat_dir, (0, 0), "garbage line")
    with Chat.open(chat_dir) as chat:
        parent = chat.text_of((1, 0))
        assert chat.core.ready() == [(0, 0)]
        chat.build((0, 0), "summary 0, once more")  # `memory compact`: no KeyError (0, 1)
        assert chat.text_of((1, 0)) == parent
        assert chat.core.ready() == []
    assert sorted(records(chat_dir)) == sorted(set(records(chat_dir)))  # no node twice
    with Chat.open(chat_dir) as chat:
        assert chat.warnings == []
        assert chat.core.tree.flags[0][0] == BUILT and chat.text_of((1, 0)) == parent


@pytest.mark.parametrize("folder", ["main", "tree"])
def test_a_line_put_into_a_log_file_leaves_every_command_working(
    tmp_path: Path, folder: str
) -> None:
    chat_dir = make_chat(tmp_path)
    with Chat.open(chat_dir, readonly=True) as chat:
        before = state(chat)
    [path] = (chat_dir / folder).iterdir()
    lines = path.read_text().splitlines(keepends=True)
    path.write_text("".join([*lines[:2], "GARBAGE\n", *lines[2:]]))  # sed -i '3i GARBAGE'
    for readonly in (True, False, False):
        with Chat.open(chat_dir, readonly=readonly) as chat:
            assert state(chat) == before
            assert chat.zoom(4, 1) == "4+1|user: one more"
            assert chat.date(4) and chat.status().messages == 5
            assert [chat.zoom(i, 1).startswith(f"{i}+1|") for i in range(5)] == [True] * 5
    assert chat.warnings == []  # the last open found the index the first writable one made


def test_a_garbled_record_is_noticed_at_open_and_built_again(tmp_path: Path) -> None:
    """Same length, so the index's sizes still fit; the hash of the file's last bytes differs,
    so the open rebuilds the index and builds the leaf again."""
    chat_dir = make_chat(tmp_path)
    with Chat.open(chat_dir, readonly=True) as chat:
        before = state(chat)
    size = len(json.dumps({"l": 0, "i": 4, "text": "user: one more", "size": 14, "free": True}))
    replace_record(chat_dir, (0, 4), "x" * size)
    with Chat.open(chat_dir) as chat:
        assert any("changed before the point it was indexed" in w for w in chat.warnings)
        assert state(chat) == before
        chat.append("ever", "still here")
    with Chat.open(chat_dir) as chat:
        assert chat.warnings == [] and chat.t == 6


def test_random_bytes_in_the_index_do_not_reach_the_views(tmp_path: Path) -> None:
    chat_dir = make_chat(tmp_path)
    with Chat.open(chat_dir, readonly=True) as chat:
        before = state(chat)
        status = chat.status()
    saved = (chat_dir / "view.json").read_bytes()
    for name in ("msg.loc", "tree-0.loc", "tree-0.size", "tree-0.flag"):
        fd = os.open(chat_dir / "index" / name, os.O_WRONLY)
        os.pwrite(fd, bytes(range(200, 232)), 4)
        os.close(fd)
    for readonly in (True, False, False):
        with Chat.open(chat_dir, readonly=readonly) as chat:
            assert chat.status() == status
            assert [chat.date(i) for i in range(5)] and chat.zoom(2, 1).startswith("2+1|user")
            assert state(chat) == before
    assert (chat_dir / "view.json").read_bytes() == saved


def test_summaries_of_a_lost_log_end_are_set_aside_not_given_to_new_messages(
    tmp_path: Path,
) -> None:
    """The newest day file deleted: the tree's records for its 200 messages must not become the
    nodes of the next 200 messages; they go to chat/quarantine/, with one warning."""
    from datetime import datetime, timedelta, timezone

    days = [datetime(2026, 6, d, 9, 0, tzinfo=timezone(timedelta(hours=1))) for d in (1, 2)]
    chat_dir = tmp_path / "chat"
    with Chat.open(chat_dir) as chat:
        for k in range(300):
            chat.append("user", f"message {k}: {LONG}", date=days[k // 100 and 1])
            chat.build((0, k), f"summary of old message {k}")
    (chat_dir / "main" / "2026-06-02.jsonl").unlink()
    with Chat.open(chat_dir) as chat:
        assert chat.t == 100
        moved = [w for w in chat.warnings if "tree records" in w]
        assert len(chat.warnings) <= 3 and len(moved) == 1
        assert int(moved[0].split()[0]) > 200  # the leaves, and the free parents above them
        for k in range(100, 110):
            chat.append("user", f"new message {k}: {LONG}")
        assert all(chat.text_of((0, k)) is None for k in range(100, 110))
        assert chat.zoom(100, 1) == f"100+1|user: new message 100: {LONG}"
        assert chat.text_of((0, 99)) == "summary of old message 99"
    [quarantined] = (chat_dir / "quarantine").iterdir()
    assert "summary of old message 100" in quarantined.read_text()
    with Chat.open(chat_dir) as chat:
        assert chat.warnings == []
    shutil.rmtree(chat_dir / "index")  # a rebuild reads every tree record again
    with Chat.open(chat_dir) as chat:
        assert chat.text_of((0, 100)) is None
