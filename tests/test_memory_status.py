"""`evertalk memory status` when the chat is behind: it says it is catching up, with how many
summaries are to go before a turn's view is whole (the figure of the app and the service's
status; every unbuilt node is the `nodes` line's figure) and about how long they take, at the
running compactor's measured rate, or else at the default pace (10 seconds a call, 8 at
once)."""

from __future__ import annotations

import argparse
import json
import os
import random
from pathlib import Path

import pytest

from evertalk.chat import Chat
from evertalk.memory_cli import run_memory_command
from evertalk.store.compactor_status import CompactorStatus, write_status

WORDS = ["backup", "rsync", "cron", "nightly", "notes", "log", "rotate", "disk", "quota", "deploy"]


def long_messages(chat: Chat, count: int) -> None:
    """Messages too long to be their own lines: each leaf and each merge needs a model call."""
    rng = random.Random(count)
    for k in range(count):
        chat.append("user", f"m{k} " + " ".join(rng.choice(WORDS) for _ in range(160)))


def status(home: Path, capsys: pytest.CaptureFixture[str], *, as_json: bool = False) -> str:
    code = run_memory_command(argparse.Namespace(action="status", json=as_json), home)
    assert code == 0
    return capsys.readouterr().out


def test_a_chat_that_is_behind_says_so_with_the_default_pace(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with Chat.open(tmp_path / "chat") as chat:
        long_messages(chat, 100)  # 100 leaves and 97 merges
    out = status(tmp_path, capsys)
    # the view's 100 lines fit once built, no merge needed: 100 summaries at 8 per 10 seconds,
    # 125 seconds; the merges are in the backlog
    assert (
        "catching up: 100 summaries to go, about 2 min "
        "(`evertalk memory compact` builds them now)\n"
    ) in out
    assert out.index("catching up") < out.index("compactor not running")
    assert ", 197 unbuilt\n" in out

    data = json.loads(status(tmp_path, capsys, as_json=True))
    assert data["catch_up"] == {
        "to_go": 100,
        "view_after_batch": data["view_bytes"],
        "behind": True,
        "eta_seconds": 125.0,
    }
    assert data["unbuilt"] == 197


def test_the_running_compactors_rate_gives_the_estimate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    chat = Chat.open(tmp_path / "chat")  # this process owns the chat, as a running evertalk
    try:
        long_messages(chat, 100)
        live = CompactorStatus(os.getpid(), 8, 189, 0, None, 12, 12, 0.01, rate=0.5)
        write_status(chat.store.path, live)
        out = status(tmp_path, capsys)
        assert "catching up: 100 summaries to go, about 3 min\n" in out  # 200 s
        assert f"compactor running in pid {os.getpid()}" in out
        data = json.loads(status(tmp_path, capsys, as_json=True))
        assert data["catch_up"]["eta_seconds"] == 200.0
        assert data["compactor"]["rate"] == 0.5
    finally:
        chat.close()


def test_a_paused_compactor_says_so_rather_than_counting_failures(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    chat = Chat.open(tmp_path / "chat")
    try:
        long_messages(chat, 100)  # far behind
        why = "12+1: Anthropic: could not connect (at http://127.0.0.1:9)"
        live = CompactorStatus(os.getpid(), 0, 30, 9, why, 9, 0, 0.0, paused=True)
        write_status(chat.store.path, live)
        out = status(tmp_path, capsys)
        assert (
            f"compactor running in pid {os.getpid()}: summarizing 0, paused until its model can "
            f"be used or reached, queued 30; last error: {why}\n"
        ) in out
        assert "failed" not in out
        assert "catching up: 100 summaries to go, paused\n" in out  # no time: none is known
        assert json.loads(status(tmp_path, capsys, as_json=True))["compactor"]["paused"] is True
    finally:
        chat.close()


def test_a_chat_whose_compactor_keeps_up_says_nothing_of_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with Chat.open(tmp_path / "chat") as chat:
        long_messages(chat, 3)
    out = status(tmp_path, capsys)
    assert "catching up" not in out
    data = json.loads(status(tmp_path, capsys, as_json=True))
    assert data["catch_up"]["behind"] is False and data["catch_up"]["to_go"] == 3


def test_the_text_and_the_json_count_the_nodes_alike(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Each number of the text's `nodes` line is the JSON's field of the same word: `built`
    is the nodes the model wrote in both, not every node that has its line."""
    with Chat.open(tmp_path / "chat") as chat:
        for k in range(6):
            chat.append("user", f"short note {k}")  # free leaves, and their free parents
        long_messages(chat, 3)
        chat.build((0, 6), "user: m0 about backups, rsync and cron")
        chat.cut((0, 7))
    data = json.loads(status(tmp_path, capsys, as_json=True))
    counts = {key: data[key] for key in ("nodes", "built", "free", "cut", "unbuilt")}
    assert counts["built"] == 1 and counts["cut"] == 1 and counts["free"] > counts["built"]
    assert counts["unbuilt"] > 0
    assert counts["nodes"] == sum(counts[key] for key in ("built", "free", "cut", "unbuilt"))
    [line] = [line for line in status(tmp_path, capsys).splitlines() if line.startswith("nodes")]
    assert line == (
        f"nodes     {counts['nodes']}: {counts['built']} built by the model, "
        f"{counts['free']} free (short enough to need no call), "
        f"{counts['cut']} cut (input shortened: no summary came), {counts['unbuilt']} unbuilt"
    )
