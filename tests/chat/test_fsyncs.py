"""What each change costs in fsyncs: one per durable record, none for what an open rebuilds."""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path

import pytest

from evertalk.chat import Chat

REAL_FSYNC = os.fsync
REAL_REPLACE = os.replace


def count_fsyncs(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Each fsync from now on, counted by the name of the file or folder it was for."""
    counts: Counter[str] = Counter()

    def fsync(fd: int) -> None:
        counts[Path(os.readlink(f"/proc/self/fd/{fd}")).name] += 1
        REAL_FSYNC(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    return counts


def count_view_saves(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Each view.json saved from now on: the message count it holds."""
    saves: list[int] = []

    def replace(src: str | Path, dst: str | Path) -> None:
        if Path(dst).name == "view.json":
            saves.append(json.loads(Path(src).read_bytes())["t"])
        REAL_REPLACE(src, dst)

    monkeypatch.setattr(os, "replace", replace)
    return saves


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="names fds through /proc")
def test_a_short_session_costs_an_fsync_per_message_and_nothing_at_close(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What a `-p` run does to the store: open, a message and a reply, close. The index keeps
    its checkpoint (the next open scans the two lines) and view.json is saved unsynced."""
    with Chat.open(tmp_path / "chat") as chat:
        chat.append("user", "the first message of the day makes the day files")
    for k in range(3):
        counts = count_fsyncs(monkeypatch)
        with Chat.open(tmp_path / "chat") as chat:
            chat.append("user", f"question {k}")
            chat.append("ever", f"answer {k}")
        day = next((tmp_path / "chat" / "main").iterdir()).name
        assert counts == {day: 2}, counts
    with Chat.open(tmp_path / "chat") as chat:
        assert chat.t == 7 and not chat.warnings
        assert chat.store.read_message(6).text == "answer 2"


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="names fds through /proc")
def test_a_message_costs_one_fsync_and_its_free_nodes_none(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Chat.open(tmp_path / "chat") as chat:
        chat.append("user", "the first message of the day makes the day files")
        counts = count_fsyncs(monkeypatch)
        for k in range(60):  # short: each is a free leaf, and some make free parents
            chat.append("user", f"message {k}")
        assert chat.status().free > 60
        day = next((tmp_path / "chat" / "main").iterdir()).name
        assert counts == {day: 60}, counts  # no view.json, no tree file, no folder


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="names fds through /proc")
def test_a_build_and_its_free_parents_share_one_fsync(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    long = "the backup ran for an hour and then failed on the last volume; " * 10
    with Chat.open(tmp_path / "chat") as chat:
        for _ in range(4):
            chat.append("user", long)
        chat.build((0, 0), "backup failed on the last volume")
        counts = count_fsyncs(monkeypatch)
        chat.build((0, 1), "it failed again")  # completes the free parent (1, 0)
        assert chat.core.tree.is_built((1, 0))
        day = next((tmp_path / "chat" / "tree").iterdir()).name
        assert counts == {day: 1}, counts


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="names fds through /proc")
def test_view_json_is_saved_at_checkpoints(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with Chat.open(tmp_path / "chat") as chat:
        chat.append("user", "first")
        counts = count_fsyncs(monkeypatch)
        saves = count_view_saves(monkeypatch)
        for k in range(130):
            chat.append("user", f"message {k}")
        assert len(saves) == 2  # every 64 messages
    assert len(saves) == 3  # and at close
    assert "view.json.tmp" not in counts  # derived: saved without fsyncs
    with Chat.open(tmp_path / "chat") as chat:
        assert chat.t == 131 and not chat.warnings


@pytest.mark.skipif(not Path("/proc/self/fd").is_dir(), reason="names fds through /proc")
def test_a_batch_appended_in_one_sync_costs_one_fsync_made_as_it_ends(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An import's batch: many messages, acknowledged together, made durable together."""
    with Chat.open(tmp_path / "chat") as chat:
        chat.append("user", "the first message of the day makes the day files")
        log = next((tmp_path / "chat" / "main").iterdir())
        # whole paths, not count_fsyncs' names: the log's and the tree's day files share one
        synced: list[Path] = []

        def fsync(fd: int) -> None:
            synced.append(Path(os.readlink(f"/proc/self/fd/{fd}")))
            REAL_FSYNC(fd)

        monkeypatch.setattr(os, "fsync", fsync)
        with chat.one_sync():
            for k in range(200):
                chat.append("user" if k % 2 else "ever", f"imported message {k}")
            assert synced == []  # nothing is acknowledged before the batch ends
        assert synced.count(log) == 1, synced
        assert len(synced) <= 2, synced  # and the tree file's free nodes, at most
    with Chat.open(tmp_path / "chat") as chat:
        assert chat.t == 201 and not chat.warnings
        assert chat.store.read_message(200).text == "imported message 199"
