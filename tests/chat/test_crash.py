"""Durability: kill -9 a writer at random points, many times; nothing acknowledged is lost."""

from __future__ import annotations

import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from chat.writer import SMALL
from evertalk.chat import Chat
from evertalk.memory.core import SavedViews
from evertalk.memory.view import coarsens, tiles
from evertalk.store.views import VIEW_NAME, parse_views
from memory.memory_reference import RefCore  # the independent model of the memory

WRITER = Path(__file__).with_name("writer.py")


def _run_writer(chat_dir: Path, first: int, seconds: float, *mode: str) -> list[int]:
    return [int(k) for k, _ in _writer_acks(chat_dir, first, seconds, *mode)]


def _writer_acks(chat_dir: Path, first: int, seconds: float, *mode: str) -> list[tuple[str, str]]:
    """Run the writer for about `seconds`, then kill -9 it: each ack's number and the rest."""
    process = subprocess.Popen(
        [sys.executable, str(WRITER), str(chat_dir), str(first), *mode],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    assert process.stdout.readline().strip() == "open"
    time.sleep(seconds)
    os.kill(process.pid, signal.SIGKILL)
    out, err = process.communicate()
    assert "Traceback" not in err, err
    return re.findall(r"^ack (\d+) ?(.*)$", out, re.M)


def test_kill_minus_nine_loses_no_acknowledged_message(tmp_path: Path) -> None:
    chat_dir = tmp_path / "chat"
    rng = random.Random(1)
    acked: list[int] = []
    for _ in range(12):
        first = acked[-1] + 1 if acked else 0
        acked += _run_writer(chat_dir, first, rng.uniform(0.05, 0.5))
        with Chat.open(chat_dir) as chat:
            found = [
                int(m.group(1))
                for i in range(chat.t)
                if (m := re.match(r"message (\d+) ", chat.store.read_message(i).text))
            ]
            assert len(found) == len(set(found)), "a message was logged twice"
            assert set(acked) <= set(found), "an acknowledged message was lost"
            assert found == sorted(found)
            view, cview = chat.core.view.nodes(), chat.core.cview.nodes()
            assert tiles(view, chat.t) and tiles(cview, chat.t) and coarsens(cview, view)
    assert len(acked) > 20


def _whole_messages(chat: Chat) -> list[int]:
    """The writer's messages in the log, each checked whole: its pages join to its full text."""
    texts = [chat.store.read_message(i).text for i in range(chat.t)]
    found: list[int] = []
    at = 0
    while at < len(texts):
        head = re.match(r"message (\d+) size (\d+) ", texts[at])
        assert head is not None, f"message {at} is a page whose message does not start there"
        text, want = texts[at], len(head.group(0)) + int(head.group(2))
        at += 1
        while len(text) < want:  # the next pages
            assert at < len(texts), "the last message lost its last pages"
            text += texts[at]
            at += 1
        assert text == head.group(0) + "x" * int(head.group(2)), "a message is not whole"
        found.append(int(head.group(1)))
    return found


def test_kill_minus_nine_keeps_long_messages_whole(tmp_path: Path) -> None:
    chat_dir = tmp_path / "chat"
    rng = random.Random(2)
    acked: list[int] = []
    for _ in range(8):
        first = acked[-1] + 1 if acked else 0
        acked += _run_writer(chat_dir, first, rng.uniform(0.05, 0.4), "long")
        with Chat.open(chat_dir) as chat:
            found = _whole_messages(chat)
            assert found == sorted(set(found)) and set(acked) <= set(found)
            pages = sum(len(chat.store.read_message(i).text) > 24_000 for i in range(chat.t))
    assert pages > 2 and len(acked) > 8


@pytest.mark.parametrize("cut", ["at a line's end", "inside a page"])
def test_a_long_message_cut_short_on_disk_is_skipped_like_a_torn_line(
    tmp_path: Path, cut: str
) -> None:
    """What a power cut can leave of the one write of a long message: its first pages, whole
    lines; they were never acknowledged, so they are skipped and their ids reused."""
    chat_dir = tmp_path / "chat"
    with Chat.open(chat_dir) as chat:
        chat.append("user", "before")
        assert chat.append("user", "y" * 80_000) == [1, 2, 3]
    [path] = (chat_dir / "main").iterdir()
    data = path.read_bytes()
    second_page_end = data.index(b"\n", data.index(b'"part": 1')) + 1
    path.write_bytes(data[: second_page_end - (cut == "inside a page") * 100])
    with Chat.open(chat_dir) as chat:
        assert chat.t == 1
        assert any("long message" in w for w in chat.warnings)
        assert len(chat.warnings) <= 4  # one each: index rebuilt, torn line, pages, views
    with Chat.open(chat_dir) as chat:  # said once: the index now knows those lines
        assert chat.t == 1 and not any("long message" in w for w in chat.warnings)
    with Chat.open(chat_dir) as chat:
        assert chat.append("user", "after") == [1]
    shutil.rmtree(chat_dir / "index")
    with Chat.open(chat_dir) as chat:
        assert chat.t == 2 and chat.store.read_message(1).text == "after"


def _folded_by_the_reference(chat: Chat, saved: SavedViews) -> RefCore:
    """The views the independent model gets from the disk's messages and nodes, restored from
    `saved` and folded forward (SPEC §3.6 step 3), with no crash in its history."""
    ref = RefCore(SMALL.ceiling, SMALL.floor, SMALL.cceiling, SMALL.cfloor, SMALL.window)
    for i in range(chat.t):
        record = chat.store.read_message(i)
        ref.inputs.append(f"{record.kind}: {record.text}")
    for level in range(chat.t.bit_length()):
        for index in range(chat.t >> level):
            node = chat.store.read_node(level, index)
            if node is not None:
                ref.texts[(level, index)] = node.text
                ref.flags[(level, index)] = node.flag
    assert saved.cview is not None
    ref.restore(saved.t, saved.view, saved.cview, saved.shrinking, saved.cshrinking)
    return ref


def test_kill_minus_nine_views_fold_forward_from_the_last_checkpoint(tmp_path: Path) -> None:
    """view.json is saved at checkpoints, not at every message. After a kill -9 it holds views
    the writer really had, and the reopened views are those views folded forward over the
    messages logged since, as the independent model folds them."""
    chat_dir = tmp_path / "chat"
    rng = random.Random(3)
    acked: list[int] = []
    behind = merged = 0
    for _ in range(10):
        first = acked[-1] + 1 if acked else 0
        acks = _writer_acks(chat_dir, first, rng.uniform(0.1, 0.6), "views")
        acked += [int(k) for k, _ in acks]
        live = {views for _, views in acks}
        raw = (chat_dir / VIEW_NAME).read_bytes()
        saved = parse_views(raw)
        with Chat.open(chat_dir, budget=SMALL) as chat:
            logged = {int(chat.store.read_message(i).text.split()[1]) for i in range(chat.t)}
            assert set(acked) <= logged, "an acknowledged message was lost"
            behind += saved.t < chat.t
            if acks and int(acks[0][0]) <= saved.t - 1 <= int(acks[-1][0]):
                # saved at an acknowledged message: the views the writer had right then
                assert raw.decode().strip() in live
            ref = _folded_by_the_reference(chat, saved)
            assert chat.core.view.nodes() == ref.view
            assert chat.core.cview.nodes() == ref.cview
            assert (chat.core.view.shrinking, chat.core.cview.shrinking) == (
                ref.shrinking,
                ref.cshrinking,
            )
            merged += any(level for level, _ in chat.core.view.nodes())
    assert behind > 0, "view.json was never behind the log: saved at every message?"
    assert merged > 0 and len(acked) > 100
