"""The service end to end, over its real socket: `evertalk serve`, `-p` through it, `service
status|stop`, against the Anthropic fake on loopback. Each test's service is stopped (or
killed) at its end."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.test_turn_support import (
    API_KEY,
    log_of,
    turn_bodies,
    workdir_beside,
    write_config,
)
from evertalk import __version__
from evertalk.processes import process_alive
from evertalk.protocol import wire
from evertalk.protocol.paths import socket_path
from fakes import AnthropicFake, ToolCall, reply, serve, slow
from fakes import chat as answer
from polling import wait_until
from served_home import environment, fake, run, served_home, start

__all__ = ["fake"]  # the fixture, used by name (here and by the modules that import it)


def service_pid(home: Path) -> int:
    status = run(home, "service", "status", "--json")
    found = json.loads(status.stdout)
    assert found["running"], status
    return int(found["pid"])


def gone(pid: int) -> bool:
    return not process_alive(pid)


def start_p(home: Path, message: str) -> subprocess.Popen[str]:
    """`evertalk -p MESSAGE` started, its output piped."""
    return start(home, "-p", message)


@pytest.fixture
def home(tmp_path: Path, fake: AnthropicFake) -> Iterator[Path]:
    with served_home(tmp_path, fake, stop=True) as home:
        yield home


@pytest.fixture
def service(home: Path) -> int:
    """A running service for `home`; its pid."""
    started = run(home, "serve")
    assert started.returncode == 0, started.stderr
    assert "evertalk service running (pid " in started.stdout
    return service_pid(home)


def test_p_runs_its_turn_in_the_service(home: Path, fake: AnthropicFake, service: int) -> None:
    fake.behaviour.push(answer("first answer"), answer("second answer"))  # type: ignore[attr-defined]
    first = run(home, "-p", "first question")
    second = run(home, "-p", "second question", "--json")
    assert (first.returncode, first.stdout, first.stderr) == (0, "first answer\n", "")
    events = [json.loads(line) for line in second.stdout.splitlines()]
    assert events[0]["type"] == "turn_started" and events[-1] == {
        "type": "turn_ended",
        "reason": "done",
        "error": None,
        "error_kind": None,
        "retry": False,
    }
    assert {"type": "reply_logged", "text": "second answer"} in events
    assert service_pid(home) == service  # the same service served both
    assert [text for kind, text in log_of(home) if kind in ("user", "ever")] == [
        "first question",
        "first answer",
        "second question",
        "second answer",
    ]
    assert API_KEY not in first.stderr + second.stdout + second.stderr
    socket_file = socket_path(home)
    assert socket_file.stat().st_mode & 0o777 == 0o600
    stopped = run(home, "service", "stop")
    assert stopped.returncode == 0 and f"(pid {service}) stopped" in stopped.stdout
    assert gone(service) and not socket_file.exists()
    assert "no evertalk service is running" in run(home, "service", "status").stdout


def test_two_p_runs_at_once_are_both_answered_once(home: Path, service: int) -> None:
    runs = [start_p(home, f"question {k}") for k in range(2)]
    outputs = [process.communicate(timeout=60) for process in runs]
    assert [process.returncode for process in runs] == [0, 0], outputs
    users = [text for kind, text in log_of(home) if kind == "user"]
    assert sorted(users) == ["question 0", "question 1"]


def hello(home: Path, version: str) -> dict[str, object]:
    """The service's answer to a raw hello of `version`."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(10)
        sock.connect(str(socket_path(home)))
        frame = {"type": "hello", "protocol": wire.PROTOCOL, "version": version, "client": "t"}
        sock.sendall(wire.encode(frame))
        reader = wire.FrameReader()
        while not (frames := reader.feed(sock.recv(65536))):
            pass
        return frames[0]


def test_a_client_of_another_version_is_refused_with_how_to_restart(
    home: Path, service: int
) -> None:
    refused = hello(home, "0.0.1")
    assert refused["type"] == "error" and refused["kind"] == "version"
    assert f"runs evertalk {__version__}" in str(refused["message"])
    assert "evertalk service stop" in str(refused["message"])
    welcome = hello(home, __version__)
    assert welcome["type"] == "welcome" and welcome["pid"] == service


def test_a_stale_socket_is_replaced_and_a_second_service_refused(home: Path) -> None:
    path = socket_path(home)
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(path))  # a service that died left its socket behind
    stale.close()
    assert path.exists()
    assert run(home, "service", "status").stdout.startswith("no evertalk service")
    started = run(home, "serve")
    assert started.returncode == 0, started.stderr
    pid = service_pid(home)
    second = run(home, "serve", "--foreground", timeout=60)
    assert second.returncode == 1
    assert second.stderr.count("\n") == 1 and "is open in another process" in second.stderr
    assert service_pid(home) == pid


def test_the_service_exits_when_idle(home: Path) -> None:
    process = subprocess.Popen(
        [sys.executable, "-m", "evertalk", "serve", "--foreground", "--idle", "0.5"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=environment(home),
    )
    _, err = process.communicate(timeout=60)
    assert process.returncode == 0
    assert "stopping: idle for 0.5 s" in err and not socket_path(home).exists()


def test_kill_9_of_the_service_mid_turn_loses_and_repeats_nothing(
    home: Path, fake: AnthropicFake, service: int
) -> None:
    """The service dies after logging the message, before the reply: the client starts a new
    one, sends the message again under its key (not logged twice) and gets its answer."""
    fake.behaviour.push(  # type: ignore[attr-defined]
        slow(30, answer("never seen")), answer("answered after the crash")
    )
    client = start_p(home, "are you there?")
    try:
        wait_until(lambda: turn_bodies(fake), "the turn's call")  # the message is logged
        os.kill(service, signal.SIGKILL)
        out, err = client.communicate(timeout=60)
    finally:
        if client.poll() is None:
            client.kill()
    assert client.returncode == 0, err
    assert out == "answered after the crash\n"
    assert err == "evertalk: the service stopped; starting it again\n"
    assert log_of(home) == [("user", "are you there?"), ("ever", "answered after the crash")]
    assert service_pid(home) != service


@pytest.mark.skipif(os.getuid() != 0, reason="needs root to connect as another user")
def test_a_client_of_another_user_is_refused(fake: AnthropicFake) -> None:
    base = Path(tempfile.mkdtemp(prefix="evertalk-peer-"))
    base.chmod(0o711)  # the other user may reach the socket: only the peer check stops it
    home = base / "home"
    try:
        with serve(fake.app) as url:
            write_config(home, base_url=url)
            assert run(home, "serve").returncode == 0
            path = socket_path(home)
            path.chmod(0o666)
            home.chmod(0o711)
            assert connect_as_nobody(path) == 0
    finally:
        run(home, "service", "stop", timeout=120)
        shutil.rmtree(base, ignore_errors=True)


def connect_as_nobody(path: Path) -> int:
    """0 when a client running as nobody is refused with an error of kind `peer`."""
    child = os.fork()
    if child == 0:  # pragma: no cover - the child reports through its exit status
        status = 2
        try:
            os.setgid(65534)
            os.setuid(65534)
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
                sock.settimeout(10)
                sock.connect(str(path))
                data = sock.recv(65536)
            frame = wire.decode(data.rstrip(b"\n"))
            status = 0 if frame.get("kind") == "peer" else 1
        finally:
            os._exit(status)
    _, status = os.waitpid(child, 0)
    return os.waitstatus_to_exitcode(status)


def test_a_stop_during_a_turn_ends_the_p_run_and_starts_no_other_service(
    home: Path, fake: AnthropicFake, service: int
) -> None:
    fake.behaviour.push(slow(30, answer("never seen")))  # type: ignore[attr-defined]
    client = start_p(home, "a long one")
    try:
        wait_until(lambda: turn_bodies(fake), "the turn's call")
        assert run(home, "service", "stop").returncode == 0
        out, err = client.communicate(timeout=60)
    finally:
        if client.poll() is None:
            client.kill()
    assert client.returncode == 1 and out == ""
    assert err.startswith("evertalk: the service was stopped (asked by stop ")
    assert err.count("\n") == 1
    assert "no evertalk service is running" in run(home, "service", "status").stdout


def test_allow_write_does_not_reach_outside_the_working_directory(
    home: Path, fake: AnthropicFake, service: int, tmp_path: Path
) -> None:
    """As `-p` in its own process: --allow write lets writes run in the working directory,
    never outside it, where a yes is needed that no one can give."""
    outside = tmp_path / "elsewhere" / "note.txt"
    inside = workdir_beside(home) / "note.txt"
    fake.behaviour.push(  # type: ignore[attr-defined]
        reply("Writing.", ToolCall("write", {"path": str(outside), "content": "out"})),
        reply("And here.", ToolCall("write", {"path": str(inside), "content": "in"})),
        answer("done"),
    )
    result = run(home, "-p", "write the notes", "--allow", "write")
    assert result.returncode == 0, result.stderr
    assert not outside.exists() and inside.read_text() == "in"


def test_serve_passes_its_idle_time_to_the_service_it_starts(home: Path) -> None:
    started = run(home, "serve", "--idle", "0.5")
    assert started.returncode == 0, started.stderr
    pid = int(started.stdout.split("(pid ")[1].split(")")[0])
    wait_until(lambda: gone(pid), "the idle exit", timeout=30)


def test_a_relative_home_starts_its_service(home: Path, fake: AnthropicFake) -> None:
    fake.behaviour.push(answer("from a relative home"))  # type: ignore[attr-defined]
    env = {k: v for k, v in environment(home).items() if k != "EVERTALK_HOME"}
    started = subprocess.run(
        [sys.executable, "-m", "evertalk", "--home", "home", "serve"],
        capture_output=True,
        text=True,
        env=env,
        cwd=home.parent,
        timeout=60,
    )
    assert started.returncode == 0, started.stderr
    result = run(home, "-p", "hi")
    assert result.stdout == "from a relative home\n"


def loaded_libraries(pid: int) -> str:
    return Path(f"/proc/{pid}/maps").read_text()


@pytest.mark.skipif(not Path("/proc/self/maps").exists(), reason="needs Linux's /proc")
def test_the_service_loads_the_model_sdk_before_any_call(
    home: Path, fake: AnthropicFake, service: int
) -> None:
    """Importing a model SDK takes seconds: a service that waited for the first call to do it
    would make the first turn of every start wait. On a chat with nothing to summarize, no call
    is made, and the SDK (its compiled part, pydantic_core) is loaded all the same."""
    wait_until(lambda: "pydantic_core" in loaded_libraries(service), "the SDK's import", 60)
    assert fake.records == []


def test_a_model_sdk_that_cannot_be_imported_does_not_stop_the_service(
    home: Path, tmp_path: Path
) -> None:
    """The SDK loaded ahead fails to import (a broken install): the service goes on serving,
    and only a call to the model meets the error."""
    broken = tmp_path / "broken"
    (broken / "anthropic").mkdir(parents=True)
    tried = tmp_path / "tried"
    (broken / "anthropic" / "__init__.py").write_text(
        f"open({str(tried)!r}, 'w').close()\nraise ImportError('a broken install')\n"
    )
    env = environment(home)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(broken), env.get("PYTHONPATH")]))
    started = subprocess.run(
        [sys.executable, "-m", "evertalk", "serve"],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert started.returncode == 0, started.stderr
    pid = service_pid(home)
    wait_until(tried.exists, "the SDK's import")
    # a status asked after the import failed: a whole process start later
    assert run(home, "service", "status").stdout.startswith(f"evertalk service (pid {pid}")
    assert not gone(pid)
