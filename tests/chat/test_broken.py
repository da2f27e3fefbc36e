"""A node the core built by itself that could not be written: the chat stops taking changes until
it is reopened, and the reopen rebuilds the state from the disk (see chat.py's docstring)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from evertalk.chat import Chat
from evertalk.memory.tree import CUT, FREE
from evertalk.store.errors import StoreError

LONG = "the restore drill took forty minutes; " * 20  # over 512 bytes: no leaf is free


def failing_flag(chat: Chat, monkeypatch: pytest.MonkeyPatch, flag: int) -> None:
    """Writes that hold a node with this flag fail as a full disk would."""
    append_nodes = chat.store.append_nodes

    def append(nodes: list[tuple[int, int, str, int]], **options: Any) -> None:
        if any(node[3] == flag for node in nodes):
            raise StoreError("cannot append to the log: No space left on device")
        append_nodes(nodes, **options)

    monkeypatch.setattr(chat.store, "append_nodes", append)


def test_a_free_parent_that_cannot_be_written_stops_the_chat_until_reopened(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    chat_dir = tmp_path / "chat"
    with Chat.open(chat_dir) as chat:
        chat.append("user", LONG)
        chat.append("ever", LONG)
        chat.append("user", LONG)
        chat.build((0, 0), "a" * 100)
        failing_flag(chat, monkeypatch, FREE)
        with pytest.raises(StoreError, match="No space left"):
            chat.build((0, 1), "b" * 100)  # its line is written; the free parent (1, 0) is not
        assert chat.core.tree.is_built((1, 0))  # the core counts it built: it differs now
        for change in (
            lambda: chat.append("user", "one more"),
            lambda: chat.build((0, 2), "c" * 100),
            lambda: chat.fail((0, 2)),
        ):
            with pytest.raises(StoreError, match="until it is reopened"):
                change()
        assert chat.t == 3
    with Chat.open(chat_dir) as chat:  # the reopen writes the lost free parent
        assert chat.text_of((1, 0)) == "a" * 100 + "\n" + "b" * 100
        chat.append("user", "one more")
        assert chat.t == 4
    with Chat.open(chat_dir, readonly=True) as chat:
        assert chat.store.read_node(1, 0) is not None


def test_a_cut_node_that_cannot_be_written_stops_the_chat_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    chat_dir = tmp_path / "chat"
    with Chat.open(chat_dir) as chat:
        chat.append("user", LONG)
        failing_flag(chat, monkeypatch, CUT)
        chat.fail((0, 0))
        chat.fail((0, 0))
        with pytest.raises(StoreError, match="No space left"):
            chat.fail((0, 0))  # the third failure builds it cut, and that write fails
        with pytest.raises(StoreError, match="until it is reopened"):
            chat.append("user", "one more")
    with Chat.open(chat_dir) as chat:  # not on disk: unbuilt again, its failures forgotten
        assert not chat.core.tree.is_built((0, 0)) and chat.core.failures == {}
