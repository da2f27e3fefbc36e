"""kill -9 at random moments during `memory forget` (SPEC §12): the chat opens after each, every
other message is as it was, the forgotten one is whole or forgotten (never half), and running
the forget again completes it."""

from __future__ import annotations

import os
import random
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from forget_helpers import SMALL, files_holding, make_chat

from evertalk.chat import Chat
from evertalk.cli import main
from evertalk.store.records import MessageRecord
from evertalk.store.search_index import SearchIndex

WORD = "zqlantern-5520"
TARGET = 17
KILLS = 20


def _command(home: Path) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if k != "EVERTALK_HOME"}
    words = ["memory", "forget", str(TARGET), "--yes"]
    return subprocess.Popen(
        [sys.executable, "-m", "evertalk", "--home", str(home), *words],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def _messages(home: Path) -> dict[int, MessageRecord]:
    with Chat.open(home / "chat", budget=SMALL) as chat:
        return {i: chat.store.read_message(i) for i in range(chat.t)}


def test_kill_minus_nine_during_a_forget_leaves_old_or_new_and_a_rerun_completes(
    tmp_path: Path,
) -> None:
    original = tmp_path / "original"
    make_chat(original, count=48, words={TARGET: WORD})
    with Chat.open(original / "chat", budget=SMALL) as chat:  # a search database to fix up too
        search = SearchIndex.open(original / "chat")
        search.catch_up(chat.store)
        search.close()
    before = _messages(original)

    timing = tmp_path / "timing"
    shutil.copytree(original, timing)
    started = time.monotonic()
    assert _command(timing).wait() == 0
    duration = time.monotonic() - started

    rng = random.Random(24)
    outcomes = set()
    for n in range(KILLS):
        home = tmp_path / f"run{n}"
        shutil.copytree(original, home)
        process = _command(home)
        # a random moment of the run, not a wait: most of a run is the interpreter starting,
        # so the moments lean late, some past the end (a kill of a finished run is harmless)
        time.sleep(rng.uniform(0.3 * duration, 1.1 * duration))
        process.send_signal(signal.SIGKILL)
        process.wait()
        after = _messages(home)
        assert {i: r for i, r in after.items() if i != TARGET} == {
            i: r for i, r in before.items() if i != TARGET
        }
        forgotten = after[TARGET].text.startswith("[forgotten on ")
        assert forgotten or after[TARGET] == before[TARGET]
        outcomes.add(forgotten)
        assert main(["memory", "forget", str(TARGET), "--yes", "--home", str(home)]) == 0
        assert _messages(home)[TARGET].text.startswith("[forgotten on ")
        assert files_holding(home, WORD) == []
        shutil.rmtree(home)
    assert outcomes == {False, True}  # some kills came before the rewrite, some after
