"""A service whose summaries cannot go on rests (SPEC §4.5, §11): its compactor paused (the model
server cannot be reached) or its nodes failed with nobody waiting, it uses next to no CPU, and
with no client it exits after its idle time, although nodes are queued.

A real `evertalk serve` process, its summary model on loopback: a closed port, or the Anthropic
fake answering every call with an error. Its CPU time is read from /proc over a few seconds of
rest: a loop that polls would use most of a core meanwhile; the bound is generous."""

from __future__ import annotations

import os
import random
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.test_turn_support import write_config
from evertalk.chat import Chat
from evertalk.protocol.paths import socket_path
from evertalk.store.compactor_status import read_status
from fakes import AnthropicFake, Fail, constant, serve
from service.test_service_socket import environment, wait_until

MESSAGES = 12  # about 1,000 bytes each: no leaf is free, four wait behind the leaf window
REST_SECONDS = 3.0
CPU_MOST = 0.5  # seconds of CPU in REST_SECONDS of rest; a polling loop took 60-90% of a core


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


def chat_with_queued_nodes(home: Path) -> None:
    rng = random.Random(5)
    with Chat.open(home / "chat") as chat:
        for k in range(MESSAGES):
            words = " ".join(rng.choice(("backup", "rsync", "nightly", "cron")) for _ in range(180))
            chat.append("user", f"m{k} {words}")


@pytest.fixture(params=["unreachable", "failing"])
def home(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Path]:
    """A home whose summary calls cannot work: nothing listens at the model's address (the
    compactor pauses), or every call is answered with a server error (the nodes fail)."""
    home = tmp_path / "home"
    if request.param == "unreachable":
        write_config(home, base_url=f"http://127.0.0.1:{closed_port()}")
        chat_with_queued_nodes(home)
        yield home
        return
    with serve(AnthropicFake(constant(Fail(500))).app) as url:
        write_config(home, base_url=url)
        chat_with_queued_nodes(home)
        yield home


def start_service(home: Path, idle: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "evertalk", "serve", "--foreground", "--idle", idle],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=environment(home),
    )


def cpu_seconds(pid: int) -> float:
    """User and system CPU time of a process so far, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def resting(home: Path) -> bool:
    """Whether the compactor gave up for now: no call running, and paused or failed nodes."""
    status = read_status(home / "chat")
    return status is not None and status.running == 0 and (status.paused or status.failed > 0)


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs /proc to read CPU time")
def test_a_service_whose_summaries_cannot_go_on_uses_no_cpu(home: Path) -> None:
    service = start_service(home, "inf")
    try:
        wait_until(lambda: resting(home), "the compactor's rest", timeout=60)
        before = cpu_seconds(service.pid)
        time.sleep(REST_SECONDS)  # the window the CPU is measured over: there is no event
        used = cpu_seconds(service.pid) - before
        assert service.poll() is None
        assert used < CPU_MOST, f"{used:.2f} s of CPU in {REST_SECONDS:g} s of rest"
    finally:
        service.terminate()
        service.communicate(timeout=60)


def test_a_service_whose_summaries_cannot_go_on_exits_when_idle(home: Path) -> None:
    service = start_service(home, "1")
    _, err = service.communicate(timeout=90)
    assert service.returncode == 0, err
    assert "stopping: idle for 1 s" in err and not socket_path(home).exists()
    status = read_status(home / "chat")
    assert status is None  # the service is gone; the nodes wait for the next one
