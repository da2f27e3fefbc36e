"""A service whose summaries cannot go on rests (SPEC §4.5, §11): its compactor paused (the model
server cannot be reached) or its nodes failed with nobody waiting, it makes no call for them
until a message comes, and with no client it exits after its idle time, although nodes are
queued.

A real `evertalk serve` process, its summary model on loopback: a closed port, or the Anthropic
fake answering every call with an error. The CPU time it uses at rest is a figure of
bench/edge_timings.py."""

from __future__ import annotations

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
def home(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[tuple[Path, AnthropicFake]]:
    """A home whose summary calls cannot work: nothing listens at the model's address (the
    compactor pauses; its fake is never asked), or every call is answered with a server error
    (the nodes fail)."""
    home = tmp_path / "home"
    fake = AnthropicFake(constant(Fail(500)))
    if request.param == "unreachable":
        write_config(home, base_url=f"http://127.0.0.1:{closed_port()}")
        chat_with_queued_nodes(home)
        yield home, fake
        return
    with serve(fake.app) as url:
        write_config(home, base_url=url)
        chat_with_queued_nodes(home)
        yield home, fake


def start_service(home: Path, idle: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "evertalk", "serve", "--foreground", "--idle", idle],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=environment(home),
    )


def resting(home: Path) -> bool:
    """Whether the compactor gave up for now: no call running, and paused or failed nodes."""
    status = read_status(home / "chat")
    return status is not None and status.running == 0 and (status.paused or status.failed > 0)


def test_a_service_whose_summaries_cannot_go_on_makes_no_call_for_them(
    home: tuple[Path, AnthropicFake],
) -> None:
    """At rest (its status written after it started what it could), a paused compactor stays
    paused, its probes failing; failed nodes that nobody waits for are not tried again."""
    path, fake = home
    service = start_service(path, "inf")
    try:
        wait_until(lambda: resting(path), "the compactor's rest", timeout=60)
        rested = read_status(path / "chat")
        calls = len(fake.records)
        time.sleep(REST_SECONDS)  # calls that must not come: no event marks their absence
        status = read_status(path / "chat")
        assert service.poll() is None
        assert rested is not None and status is not None
        if rested.paused:
            assert status.paused
        else:
            assert len(fake.records) == calls > 0
            assert (status.calls, status.failed) == (rested.calls, rested.failed)
    finally:
        service.terminate()
        service.communicate(timeout=60)


def test_a_service_whose_summaries_cannot_go_on_exits_when_idle(
    home: tuple[Path, AnthropicFake],
) -> None:
    path, _ = home
    service = start_service(path, "1")
    _, err = service.communicate(timeout=90)
    assert service.returncode == 0, err
    assert "stopping: idle for 1 s" in err and not socket_path(path).exists()
    status = read_status(path / "chat")
    assert status is None  # the service is gone; the nodes wait for the next one
