"""kill -9 of a process that appends messages while its compactor works (8 calls at once),
then a restart that carries on: every message acknowledged is there once, whole; every node
ends up built exactly once; the view settles (SPEC §1.3, §2.4, §3.6)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from driver import KEY, message
from test_service import assert_built_once, tree_records

from evertalk.chat import Chat
from evertalk.memory.text import PLACEHOLDER
from fakes import AnthropicFake, serve, slow, summarizer

LAST = 400
DRIVER = Path(__file__).with_name("driver.py")


def start(home: Path, url: str) -> subprocess.Popen[str]:
    tests = str(Path(__file__).resolve().parent.parent)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("ANTHROPIC_", "EVERTALK_"))}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, (tests, env.get("PYTHONPATH"))))
    command = [sys.executable, str(DRIVER), str(home), url, str(LAST)]
    return subprocess.Popen(command, env=env, stdout=subprocess.PIPE, text=True)


def read_until(process: subprocess.Popen[str], wanted: str, timeout: float) -> list[str]:
    """The lines the process printed up to `wanted` (its line included)."""
    assert process.stdout is not None
    deadline, lines = time.monotonic() + timeout, []
    while time.monotonic() < deadline:
        line = process.stdout.readline().strip()
        if not line:
            assert process.poll() is None, f"the driver ended early: {process.returncode}"
            continue
        lines.append(line)
        if line == wanted:
            return lines
    raise AssertionError(f"no {wanted!r} within {timeout} s")


def test_kill_9_mid_compaction_then_restart(home: Path) -> None:
    chat_dir = home / "chat"
    # each call streams for a while, so that calls are in flight at the kill
    fake = AnthropicFake(slow(0.0, summarizer(300), chunk_delay=0.02), text_chunk=24)
    with serve(fake.app) as url:
        process = start(home, url)
        try:
            acked = read_until(process, "ack 199", 120)
            deadline = time.monotonic() + 30
            while fake.totals.requests < 40 or not any(not r.finished for r in fake.records):
                assert time.monotonic() < deadline, "no call in flight to kill"
                time.sleep(0.01)
        finally:
            os.kill(process.pid, signal.SIGKILL)
            process.wait(timeout=30)
        built_before = {(r["l"], r["i"]): r["text"] for r in tree_records(chat_dir)}
        assert built_before, "nothing was built before the kill"
        with Chat.open(chat_dir, readonly=True) as chat:
            assert chat.t >= len(acked)  # every acknowledged message survived

        process = start(home, url)
        try:
            read_until(process, "done", 180)
            assert process.wait(timeout=30) == 0
        finally:
            if process.poll() is None:
                process.kill()

    records = assert_built_once(chat_dir, LAST)
    after = {(r["l"], r["i"]): r["text"] for r in records}
    assert built_before.items() <= after.items()  # nothing built before the kill was redone
    with Chat.open(chat_dir) as chat:
        assert chat.t == LAST
        for k in range(LAST):
            record = chat.store.read_message(k)
            assert (record.kind, record.text) == message(k)  # once each, whole, in order
        view = chat.render_view()
        assert PLACEHOLDER not in view and not chat.core.view.shrinking
        assert chat.core.view.size <= chat.core.budget.ceiling + 512
    assert KEY.encode() not in b"".join(p.read_bytes() for p in home.rglob("*") if p.is_file())
