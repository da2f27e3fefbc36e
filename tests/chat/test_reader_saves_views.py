"""A read-only command that had to fold the views saves them, when nobody owns the chat (SPEC
§3.6): a chat without view.json is folded from message 0 once, not at every `memory status`."""

from __future__ import annotations

import argparse
import shutil
from pathlib import Path

import pytest

from evertalk.chat import Chat
from evertalk.memory_cli import run_memory_command
from evertalk.store.views import VIEW_NAME
from store.store_helpers import lock_held, snapshot


def build(home: Path, count: int = 300) -> Path:
    """A chat of `count` messages, some summarized, its view.json then deleted."""
    chat_dir = home / "chat"
    with Chat.open(chat_dir) as chat:
        for k in range(count):
            chat.append("user" if k % 2 else "ever", f"message {k}: " + "word " * (k % 140))
        for level, index in [(0, 1), (0, 3), (0, 5)]:
            if not chat.core.tree.is_built((level, index)):
                chat.build((level, index), f"summary of {index}")
    (chat_dir / VIEW_NAME).unlink()
    return chat_dir


def memory_status(home: Path, capsys: pytest.CaptureFixture[str]) -> str:
    code = run_memory_command(argparse.Namespace(action="status", json=False), home)
    assert code == 0
    return capsys.readouterr().err


def test_memory_status_saves_the_views_it_folded(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home = tmp_path / "home"
    chat_dir = build(home)
    owner = tmp_path / "owner" / "chat"
    shutil.copytree(chat_dir, owner)
    with Chat.open(owner):  # what the owner folds and saves at its open
        pass
    assert "view.json is missing" in memory_status(home, capsys)
    assert (chat_dir / VIEW_NAME).read_bytes() == (owner / VIEW_NAME).read_bytes()
    files = snapshot(chat_dir)
    assert memory_status(home, capsys) == ""  # folded once: the next call loads them
    assert snapshot(chat_dir) == files


def test_a_reader_beside_an_owner_saves_no_views(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home = tmp_path / "home"
    chat_dir = build(home, 40)
    with lock_held(chat_dir):
        files = snapshot(chat_dir)
        for _ in range(2):
            assert "view.json is missing" in memory_status(home, capsys)
        assert snapshot(chat_dir) == files


def test_a_reader_saves_no_views_over_a_log_that_grew_meanwhile(tmp_path: Path) -> None:
    """The views folded for the log as it was read are not saved for a longer one."""
    chat_dir = build(tmp_path / "home", 40)
    with Chat.open(chat_dir, readonly=True) as reader:
        (chat_dir / VIEW_NAME).unlink()
        with Chat.open(chat_dir) as owner:
            owner.append("user", "one more")
        saved = (chat_dir / VIEW_NAME).read_bytes()  # the owner's, for 41 messages
        (chat_dir / VIEW_NAME).unlink()
        assert reader.save_folded_views() is False
    assert not (chat_dir / VIEW_NAME).exists()
    with Chat.open(chat_dir, readonly=True) as reader:  # the log as it is now: saved
        assert reader.t == 41
    assert (chat_dir / VIEW_NAME).read_bytes() == saved


def test_a_reader_saves_views_with_the_index_it_rebuilt_but_not_over_damage(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home = tmp_path / "home"
    chat_dir = build(home, 40)
    shutil.rmtree(chat_dir / "index")
    said = memory_status(home, capsys)
    assert "rebuilding the index" in said and "view.json is missing" in said
    assert (chat_dir / VIEW_NAME).exists() and memory_status(home, capsys) == ""

    (chat_dir / VIEW_NAME).unlink()
    [day] = (chat_dir / "main").glob("*.jsonl")
    with day.open("ab") as file:
        file.write(b"GARBAGE\n")  # damage: the owner's to report
    files = snapshot(chat_dir)
    for _ in range(2):
        assert "not valid JSON" in memory_status(home, capsys)
        assert snapshot(chat_dir) == files
