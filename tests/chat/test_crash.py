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

from evertalk.chat import Chat
from evertalk.memory.view import coarsens, tiles

WRITER = Path(__file__).with_name("writer.py")


def _run_writer(chat_dir: Path, first: int, seconds: float, *mode: str) -> list[int]:
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
    return [int(k) for k in re.findall(r"^ack (\d+)$", out, re.M)]


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
