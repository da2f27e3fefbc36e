"""Durability: kill -9 a writer at random points, many times; nothing acknowledged is lost."""

from __future__ import annotations

import os
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

from evertalk.chat import Chat
from evertalk.memory.view import coarsens, tiles

WRITER = Path(__file__).with_name("writer.py")


def _run_writer(chat_dir: Path, first: int, seconds: float) -> list[int]:
    process = subprocess.Popen(
        [sys.executable, str(WRITER), str(chat_dir), str(first)],
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
