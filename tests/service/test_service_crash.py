"""kill -9 of the service while summaries are in flight: the next client starts another, which
finds every acknowledged message in the log, completes the tree, and shows the view that a fresh
open of the files computes."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_service_socket import gone, run, service_pid, wait_until

from agent.test_turn_support import is_compaction, log_of
from evertalk import __version__
from evertalk.protocol import wire
from evertalk.protocol.paths import socket_path
from fakes import AnthropicFake, Call, Script, slow, summarizer
from fakes import chat as answer
from fakes.behaviours import Outcome
from served_home import served_home

SUMMARY = summarizer(100)
HELD = slow(30, SUMMARY)  # still in flight when the service that asked for it is killed


class Summaries:
    """Compactions answered at once, or held while `holding` is set."""

    def __init__(self) -> None:
        self.holding = threading.Event()
        self.held = 0

    def __call__(self, call: Call) -> Outcome:
        if self.holding.is_set():
            self.held += 1
            return HELD(call)
        return SUMMARY(call)


@pytest.fixture
def summaries() -> Summaries:
    return Summaries()


@pytest.fixture
def fake(summaries: Summaries) -> AnthropicFake:
    return AnthropicFake(Script().route(is_compaction, summaries))


@pytest.fixture
def home(tmp_path: Path, fake: AnthropicFake) -> Iterator[Path]:
    # a turn never waits for a held summary
    with served_home(tmp_path, fake, settle=0, stop=True) as home:
        yield home


def message(k: int) -> str:
    """A message long enough to need a summary of its own (free leaves need none)."""
    return f"note {k}: " + " ".join(f"word{k}x{j}" for j in range(150))


def memory_status(home: Path) -> dict[str, Any]:
    result = run(home, "memory", "status", "--json")
    assert result.returncode == 0, result.stderr
    found: dict[str, Any] = json.loads(result.stdout)
    return found


def live_view(home: Path) -> str:
    """The view the service holds, as `/memory` shows it."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(30)
        sock.connect(str(socket_path(home)))
        hello = {"type": "hello", "protocol": wire.PROTOCOL, "version": __version__, "client": "t"}
        sock.sendall(wire.encode(hello) + wire.encode({"type": "command", "name": "/memory"}))
        reader = wire.FrameReader()
        while True:
            for frame in reader.feed(sock.recv(65536)):
                if frame["type"] == "output":
                    return str(frame["texts"][0])
                assert frame["type"] in ("welcome", "memory_warning"), frame


def tiles(view: str, t: int) -> bool:
    """Whether the view's lines cover messages 0 to t-1, each once, in order."""
    at = 0
    for start, count in re.findall(r"^(\d+)\+(\d+)\|", view, re.M):
        if int(start) != at:
            return False
        at += int(count)
    return at == t


def test_kill_9_during_compaction_loses_no_acknowledged_message(
    home: Path, fake: AnthropicFake, summaries: Summaries
) -> None:
    started = run(home, "serve")
    assert started.returncode == 0, started.stderr
    pid = service_pid(home)
    summaries.holding.set()
    for k in range(3):
        fake.behaviour.push(answer(f"answer {k}"))  # type: ignore[attr-defined]
        acknowledged = run(home, "-p", message(k))
        assert (acknowledged.returncode, acknowledged.stdout) == (0, f"answer {k}\n")
    wait_until(lambda: summaries.held > 0, "a summary in flight")
    running = json.loads(run(home, "service", "status", "--json").stdout)
    assert running["compactor_running"] > 0 and memory_status(home)["unbuilt"] > 0
    assert tiles(run(home, "memory", "view").stdout, 6)
    os.kill(pid, signal.SIGKILL)
    wait_until(lambda: gone(pid), "the service's end")
    summaries.holding.clear()

    fake.behaviour.push(answer("answer 3"))  # type: ignore[attr-defined]
    after = run(home, "-p", message(3))
    assert (after.returncode, after.stdout, after.stderr) == (0, "answer 3\n", "")
    assert service_pid(home) != pid
    expected = [(kind, text) for k in range(4) for kind, text in _turn(k)]
    assert log_of(home) == expected  # nothing lost, nothing twice

    wait_until(lambda: memory_status(home)["unbuilt"] == 0, "the whole tree", timeout=30)
    status = memory_status(home)
    assert (status["messages"], status["cut"]) == (8, 0)
    view = live_view(home)
    assert tiles(view, 8)
    shown = run(home, "memory", "view")  # the files, opened afresh beside the service
    assert shown.returncode == 0 and shown.stdout == view + "\n"
    assert run(home, "service", "stop").returncode == 0
    assert run(home, "memory", "view").stdout == shown.stdout  # and once it is gone


def _turn(k: int) -> list[tuple[str, str]]:
    return [("user", message(k)), ("ever", f"answer {k}")]
