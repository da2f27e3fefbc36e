"""kill -9 of the service while a message it acknowledged waits for the running turn: the next
service finds it in `chat/held.jsonl`, logs it once and answers it (SPEC §6.4). The client is a
raw socket that never sends anything again, as the app does not."""

from __future__ import annotations

import os
import signal
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_service_socket import gone, run, service_pid, wait_until

from agent.test_turn_support import log_of, turn_bodies, workdir_beside
from evertalk import __version__
from evertalk.protocol import wire
from evertalk.protocol.paths import socket_path
from fakes import AnthropicFake, slow
from fakes import chat as answer
from served_home import fake, served_home

__all__ = ["fake"]  # the fixture, used by name


@pytest.fixture
def home(tmp_path: Path, fake: AnthropicFake) -> Iterator[Path]:
    with served_home(tmp_path, fake, settle=0, stop=True) as home:
        yield home


class Window:
    """A client on the service's socket that reads frames until the one it waits for."""

    def __init__(self, home: Path) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(30)
        self.sock.connect(str(socket_path(home)))
        self.reader = wire.FrameReader()
        self.pending: list[dict[str, Any]] = []
        hello = {"type": "hello", "protocol": wire.PROTOCOL, "version": __version__}
        self.sock.sendall(wire.encode(hello | {"client": "app", "pid": os.getpid()}))
        self.until("welcome")

    def until(self, kind: str) -> dict[str, Any]:
        while True:
            while self.pending:
                frame = self.pending.pop(0)
                if frame["type"] == kind:
                    return frame
            self.pending = self.reader.feed(self.sock.recv(65536))

    def send(self, text: str, key: str, cwd: Path) -> dict[str, Any]:
        self.sock.sendall(wire.encode({"type": "send", "text": text, "key": key, "cwd": str(cwd)}))
        return self.until("accepted")

    def close(self) -> None:
        self.sock.close()


def test_a_held_message_survives_kill_9_and_is_logged_once(home: Path, fake: AnthropicFake) -> None:
    fake.behaviour.push(slow(60, answer("never heard")), answer("answer to the second"))  # type: ignore[attr-defined]
    assert run(home, "serve").returncode == 0
    pid = service_pid(home)
    window = Window(home)
    cwd = workdir_beside(home)
    assert window.send("first question", "key-1", cwd)["held"] is False
    window.until("turn_started")
    wait_until(lambda: len(turn_bodies(fake)) == 1, "the first turn's call")
    accepted = window.send("second question, typed while Ever works", "key-2", cwd)
    assert accepted["held"] is True and accepted["duplicate"] is False
    os.kill(pid, signal.SIGKILL)
    wait_until(lambda: gone(pid), "the service's end")
    window.close()

    assert run(home, "serve").returncode == 0  # opens the chat: the held message opens a turn
    wait_until(lambda: ("ever", "answer to the second") in log_of(home), "the held message's turn")
    users = [text for kind, text in log_of(home) if kind == "user"]
    assert users == ["first question", "second question, typed while Ever works"]
    held = home / "chat" / "held.jsonl"
    wait_until(lambda: held.stat().st_size == 0, "the held file emptied")
    assert held.stat().st_mode & 0o777 == 0o600
    assert service_pid(home) != pid


def test_a_turn_cut_off_by_service_stop_is_logged_as_the_service_stopping(
    home: Path, fake: AnthropicFake
) -> None:
    fake.behaviour.push(slow(60, answer("never heard")))  # type: ignore[attr-defined]
    assert run(home, "serve").returncode == 0
    window = Window(home)
    window.send("a question", "key-1", workdir_beside(home))
    window.until("turn_started")
    wait_until(lambda: len(turn_bodies(fake)) == 1, "the turn's call")
    assert run(home, "service", "stop").returncode == 0
    window.close()
    (stop,) = [text for kind, text in log_of(home) if kind == "echo"]
    assert stop.startswith("turn stopped: the service stopped (asked by stop ")
