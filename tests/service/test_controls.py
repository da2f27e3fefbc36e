"""Controls that do what they say: Ctrl+C on `-p` cancels its turn in the service and exits
130; a window does not start a service that was stopped on purpose; a fixed environment reaches
the service; a slow start is waited for. Each through the real command line and socket."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

from test_held_crash import Window, fake, home
from test_service_socket import environment, run, service_pid, start_p, wait_until

from agent.test_turn_support import (
    MODEL,
    is_compaction,
    log_of,
    turn_bodies,
    workdir_beside,
)
from evertalk.chat import Chat
from evertalk.client.connection import connect, running
from evertalk.protocol import replies, requests
from evertalk.service_hold import holding
from evertalk.service_opening import STARTING
from evertalk.store.lock import ChatLock
from fakes import AnthropicFake, Fail, Script, constant, serve, slow, summarizer
from fakes import chat as answer
from home_config import write_config
from served_home import start

__all__ = ["fake", "home"]  # the fixtures, used by name


def stopped_turns(home: Path) -> list[str]:
    """The lines the log has for turns that were stopped before their end."""
    return [text for kind, text in log_of(home) if kind == "echo" and "stopped" in text]


def test_ctrl_c_on_p_cancels_its_turn_in_the_service_and_exits_130(
    home: Path, fake: AnthropicFake
) -> None:
    fake.behaviour.push(slow(120, answer("the end of a long reply")))  # type: ignore[attr-defined]
    client = start_p(home, "a question that takes long")
    try:
        wait_until(lambda: turn_bodies(fake), "the turn's call")
        client.send_signal(signal.SIGINT)
        out, err = client.communicate(timeout=60)
    finally:
        if client.poll() is None:
            client.kill()
    assert client.returncode == 130, err
    assert out == "" and err.count("\n") == 1 and "interrupted" in err, err
    assert "went away" not in err
    # the service ended the turn at once, not when the reply would have come
    wait_until(lambda: stopped_turns(home), "the turn's stop in the log")
    assert ("ever", "the end of a long reply") not in log_of(home)
    assert json.loads(run(home, "service", "status", "--json").stdout)["busy"] is False


def test_no_service_starts_while_memory_repair_holds_it(home: Path, fake: AnthropicFake) -> None:
    with holding(home, "memory repair"):
        held = run(home, "-p", "anyone there?")
        assert held.returncode == 1
        assert held.stderr.startswith("evertalk: memory repair (pid ")
        assert "the service starts again once it ends" in held.stderr
        assert not running(home)
    assert not (home / "service.hold").exists()
    fake.behaviour.push(answer("here"))  # type: ignore[attr-defined]
    assert run(home, "-p", "anyone there?").stdout == "here\n"


def test_config_edited_while_a_window_is_open_applies_between_turns(
    home: Path, fake: AnthropicFake
) -> None:
    assert run(home, "serve").returncode == 0
    window = Window(home)
    try:
        config = home / "config.toml"
        config.write_text(config.read_text().replace("[memory]", "[memory\n"))
        warned = window.until("memory_warning")
        assert "config.toml" in warned["text"] and "goes on" in warned["text"], warned
        config.write_text(config.read_text().replace("[memory\n", "[memory]"))
        config.write_text(config.read_text().replace(MODEL, "claude-edited-5"))
        reopened = window.until("reopened")
        assert reopened["model"] == "claude-edited-5"
    finally:
        window.close()
    fake.behaviour.push(answer("on the new model"))  # type: ignore[attr-defined]
    result = run(home, "-p", "which model?")
    assert result.stdout == "on the new model\n", result.stderr
    assert turn_bodies(fake)[-1]["model"] == "claude-edited-5"


def run_with(home: Path, variables: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """`evertalk ARGS` with provider variables set, as a user's shell would have them."""
    return subprocess.run(
        [sys.executable, "-m", "evertalk", *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=environment(home) | variables,
        cwd=workdir_beside(home),
        timeout=60,
    )


WRONG_KEY = "sk-ant-wrong-SECRET-9876543210"


def test_a_fixed_environment_restarts_a_service_no_other_client_holds(
    home: Path, fake: AnthropicFake
) -> None:
    refusing = AnthropicFake(Script(default=constant(Fail(401, "invalid x-api-key"))))
    with serve(refusing.app) as wrong_url:
        first = run_with(home, {"ANTHROPIC_BASE_URL": wrong_url}, "-p", "hello?")
        assert first.returncode == 1 and "invalid x-api-key" in first.stderr, first.stderr
    started = service_pid(home)
    fake.behaviour.push(answer("hello from the right server"))  # type: ignore[attr-defined]
    fixed = run(home, "-p", "--retry")
    assert fixed.returncode == 0, fixed.stderr
    assert fixed.stdout == "hello from the right server\n"
    assert service_pid(home) != started


def test_a_differing_variable_is_named_while_another_client_holds_the_service(
    home: Path, fake: AnthropicFake
) -> None:
    assert run(home, "serve").returncode == 0
    started = service_pid(home)
    window = Window(home)
    try:
        fake.behaviour.push(answer("from the service as it was"))  # type: ignore[attr-defined]
        result = run_with(home, {"ANTHROPIC_API_KEY": WRONG_KEY}, "-p", "which key?")
    finally:
        window.close()
    assert result.returncode == 0, result.stderr
    assert result.stdout == "from the service as it was\n"
    assert "ANTHROPIC_API_KEY" in result.stderr and "service stop" in result.stderr
    assert service_pid(home) == started
    assert WRONG_KEY not in result.stderr
    assert WRONG_KEY not in (home / "service.log").read_text()


def log_as(home: Path, pid: int, line: str) -> None:
    """A line of `service.log` as the service with `pid` writes it."""
    with (home / "service.log").open("a") as log:
        log.write(f"2026-01-01T00:00:00+00:00 [{pid}] {line}\n")


def test_serve_waits_for_a_service_that_is_still_opening_the_chat(
    home: Path, fake: AnthropicFake
) -> None:
    """A service opening a large chat holds its lock and has said so, with no socket yet (the
    test stands in for it until the service that the client started has given up on the
    lock); the client waits for it, says so, and then connects."""
    Chat.open(home / "chat").close()
    lock = ChatLock.acquire(home / "chat")
    log_as(home, os.getpid(), f"{STARTING} at {home / 'chat'}")
    client = start(home, "serve")
    foreground: subprocess.Popen[bytes] | None = None
    try:
        assert client.stderr is not None
        said = client.stderr.readline()  # it says it waits, or it ends
        assert "opening the chat" in said, said
        log = home / "service.log"
        wait_until(lambda: "cannot serve" in log.read_text(), "the started service giving up")
        lock.release()
        with log.open("ab") as output:
            foreground = subprocess.Popen(
                [sys.executable, "-m", "evertalk", "serve", "--foreground"],
                stdin=subprocess.DEVNULL,
                stdout=output,
                stderr=output,
                env=environment(home),
                cwd=home,
            )
        out, err = client.communicate(timeout=60)
        assert client.returncode == 0, err
        assert f"evertalk service running (pid {foreground.pid})" in out
        assert err == "", err  # the one line it said above
    finally:
        lock.release()
        if client.poll() is None:
            client.kill()
        if foreground is not None:
            run(home, "service", "stop")
            foreground.wait(timeout=60)


def test_a_summary_in_flight_does_not_keep_a_service_on_old_variables(tmp_path: Path) -> None:
    """The service's only work is a slow summary: a client with another base URL has it
    restart (the summary cancelled), and its turn goes to its own URL."""
    home = tmp_path / "home"
    old = AnthropicFake(Script().route(is_compaction, slow(120, summarizer(120))))
    new = AnthropicFake(Script(default=answer("from the new address")))
    with serve(old.app) as old_url, serve(new.app) as new_url:
        write_config(home, base_url=old_url, settle=0)
        with connect(home, "capture", start=True) as conn:
            text = "a note long enough that its line needs the model " * 20
            message = requests.OutsideMessage(kind="user", text=text, key="k0")
            conn.request(requests.Append(messages=[message]), replies.Appended)
        wait_until(lambda: len(old.records) > 0, "the summary's call", 30)
        started = service_pid(home)
        result = run_with(home, {"ANTHROPIC_BASE_URL": new_url}, "-p", "where are you?")
        try:
            assert result.returncode == 0, result.stderr
            assert result.stdout == "from the new address\n"
            assert "keeps its own" not in result.stderr
            assert service_pid(home) != started
        finally:
            run(home, "service", "stop", timeout=60)
