"""`evertalk memory compact` end to end: a client of the service, which builds the summaries with
the real SDK against a loopback fake (SPEC §4).

The fake listens on 127.0.0.1 in a thread of the test process; the service that the command
starts finds it through ANTHROPIC_BASE_URL, as a user's proxy would be found. The chats are made
here with the real Chat, closed, then handed to the command. Each test's service is stopped
before its fake goes, so that no call of its is left hanging.
"""

from __future__ import annotations

import json
import os
import pty
import random
import re
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

import pytest
from test_service import tree_records

from evertalk.chat import Chat
from evertalk.client.connection import stop_service
from evertalk.ledger import ledger_path, read_records
from evertalk.protocol.paths import log_path, socket_path
from fakes import AnthropicFake, Call, Script, empty, serve, slow, summarizer
from fakes import chat as answer
from polling import wait_until

KEY = "sk-ant-api03-compact-cli-tests-SECRET-91b2e0"
MODEL = "claude-haiku-4-5"
EVERTALK = [sys.executable, "-m", "evertalk"]
UNUSED_URL = "http://127.0.0.1:9"  # discard port: nothing listens there

_WORDS = """
backup rsync cron nightly notes log rotate disk quota naïve café 日本語 straße ключ deploy branch
rebase merge conflict test fixture timeout retry socket proxy cache token python anyio httpx
"""
WORDS = _WORDS.split()


@pytest.fixture(autouse=True)
def _no_service_left(home: Path) -> Iterator[None]:
    """The homes here are not in tmp_path, where the suite looks for services to stop."""
    yield
    stop_service(home, "test")


def make_chat(home: Path, count: int, sizes: tuple[int, ...], seed: int) -> None:
    rng = random.Random(seed)
    with Chat.open(home / "chat") as chat:
        for k in range(count):
            size = rng.choice(sizes)
            words = [f"m{k}"]
            while len(" ".join(words).encode()) < size:
                words.append(rng.choice(WORDS))
            chat.append(rng.choice(("user", "ever", "echo")), " ".join(words))


def environment(home: Path, url: str, key: str = KEY) -> dict[str, str]:
    own = ("ANTHROPIC_", "OPENAI_", "OPENROUTER_", "EVERTALK_")
    env = {name: value for name, value in os.environ.items() if not name.startswith(own)}
    env.update(
        EVERTALK_HOME=str(home),
        EVERTALK_PROVIDER="anthropic",
        EVERTALK_MEMORY_MODEL=MODEL,
        EVERTALK_SERVICE_IDLE="30",  # a service a failed test leaves goes by itself
        ANTHROPIC_BASE_URL=url,
        ANTHROPIC_API_KEY=key,
    )
    return env


def evertalk(home: Path, url: str, *args: str, key: str = KEY) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*EVERTALK, *args],
        env=environment(home, url, key),
        capture_output=True,
        text=True,
        timeout=60,
        cwd=home,
    )


def start(
    home: Path, url: str, *args: str, stderr: int | IO[Any] = subprocess.PIPE
) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*EVERTALK, *args],
        env=environment(home, url),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=stderr,
        text=True,
        cwd=home,
    )


@contextmanager
def served(home: Path, fake: AnthropicFake) -> Iterator[str]:
    """The fake on loopback; the home's service is stopped before the fake goes."""
    with serve(fake) as url:
        try:
            yield url
        finally:
            stop_service(home, "test")


def model_built(chat_dir: Path) -> dict[tuple[int, int], str]:
    return {
        (r["l"], r["i"]): r["text"]
        for r in tree_records(chat_dir)
        if not r.get("free") and not r.get("cut")
    }


def assert_built_once(chat_dir: Path, t: int) -> None:
    counts = Counter((r["l"], r["i"]) for r in tree_records(chat_dir))
    assert not [node for node, count in counts.items() if count > 1], "a node built twice"
    expected = {(level, i) for level in range(t.bit_length()) for i in range(t >> level)}
    assert counts.keys() == expected, sorted(expected ^ counts.keys())[:10]


def assert_no_key(home: Path, *outputs: str) -> None:
    for output in outputs:
        assert KEY not in output
    for path in home.rglob("*"):
        if path.is_file():
            assert KEY.encode() not in path.read_bytes(), f"the API key is in {path}"


def one_line_error(result: subprocess.CompletedProcess[str]) -> str:
    assert result.returncode == 1, result
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("evertalk: "), result.stderr
    return lines[0]


def memory_status(home: Path) -> dict[str, Any]:
    result = evertalk(home, UNUSED_URL, "memory", "status", "--json")
    assert result.returncode == 0, result.stderr
    found: dict[str, Any] = json.loads(result.stdout)
    return found


def service_pid(home: Path) -> int | None:
    found = json.loads(evertalk(home, UNUSED_URL, "service", "status", "--json").stdout)
    return int(found["pid"]) if found["running"] else None


def paced(seconds: float = 0.005) -> AnthropicFake:
    """A summarizer whose replies trickle, so that a compaction of 63 nodes takes a few
    seconds: there is time to watch it, and to leave it."""
    return AnthropicFake(slow(0.0, summarizer(300), chunk_delay=seconds), text_chunk=16)


def test_compact_without_a_chat_fails_in_one_line_and_starts_no_service(home: Path) -> None:
    result = evertalk(home, UNUSED_URL, "memory", "compact")
    line = one_line_error(result)
    assert "no chat" in line
    assert not (home / "chat").exists()
    assert not socket_path(home).exists() and not log_path(home).exists()


def test_a_wrong_key_fails_in_one_line_and_never_shows_the_key(home: Path) -> None:
    make_chat(home, 12, (1_000, 2_000), seed=2)
    fake = AnthropicFake(summarizer(300), api_key="the-right-key")
    with served(home, fake) as url:
        result = evertalk(home, url, "memory", "compact")
    line = one_line_error(result)
    assert "cannot be used" in line and "key" in line.lower(), line
    assert fake.records and all(r.status == 401 for r in fake.records)
    assert model_built(home / "chat") == {}
    assert not any(r.get("cut") for r in tree_records(home / "chat"))
    assert_no_key(home, result.stdout, result.stderr)


def test_compact_through_the_service_builds_the_whole_tree(home: Path) -> None:
    """On a terminal the progress line is redrawn as the service builds; the command ends with
    the whole tree built once, and leaves the service running."""
    make_chat(home, 32, (1_000, 3_000), seed=3)  # no free node: 32 leaves and 31 merges to build
    chat_dir = home / "chat"
    fake = paced()
    reader, writer = pty.openpty()
    with served(home, fake) as url:
        process = start(home, url, "memory", "compact", stderr=writer)
        os.close(writer)
        shown = b""
        while chunk := _read(reader):
            shown += chunk
        process.wait(timeout=30)
        os.close(reader)
        pid = service_pid(home)
    text = shown.decode()
    assert process.returncode == 0, text
    assert process.stdout is not None and process.stdout.read() == ""
    drawn = re.findall(r"\r(\[[#-]{24}\] built (\d+)/63 · calls \d+ · \$[\d.]+[^\r\n]*)", text)
    assert any(0 < int(done) < 63 for _, done in drawn), text  # drawn while it worked
    last = text.strip().splitlines()[-1]
    assert re.search(r"\[#{24}\] built 63/63 · calls 63 · \$\d+\.\d{4}$", last), last
    assert fake.totals.requests == 63
    assert_built_once(chat_dir, 32)
    status = memory_status(home)
    assert (status["unbuilt"], status["built"]) == (0, 63)
    assert pid is not None  # the service stays: it is not the command's to stop
    records = read_records(ledger_path(home)).records
    assert {r.role for r in records} == {"compaction"} and {r.model for r in records} == {MODEL}
    assert_no_key(home, text)


def _read(descriptor: int) -> bytes:
    try:
        return os.read(descriptor, 65536)
    except OSError:  # the other end closed: the command is over
        return b""


def test_ctrl_c_leaves_the_service_building_and_a_later_run_has_nothing_to_do(
    home: Path,
) -> None:
    make_chat(home, 32, (1_000, 3_000), seed=3)
    chat_dir = home / "chat"
    fake = paced(0.01)
    with served(home, fake) as url:
        process = start(home, url, "memory", "compact")
        try:
            wait_until(lambda: len(model_built(chat_dir)) >= 8, "the first summaries")
        finally:
            process.send_signal(signal.SIGINT)
            out, err = process.communicate(timeout=30)
        assert process.returncode == 130, err
        assert out == ""
        said = err.strip().splitlines()[-1]
        assert re.fullmatch(
            r"stopped watching: the service goes on building the summaries "
            r"\([\d,]+ left to build\); evertalk memory status shows how far it is",
            said,
        ), err
        assert len(model_built(chat_dir)) < 63, "it finished before the interrupt"

        # no client at all now: the service builds on to the end
        wait_until(lambda: memory_status(home)["unbuilt"] == 0, "the whole tree")
        assert_built_once(chat_dir, 32)
        assert fake.totals.requests == 63

        # and once more: nothing to do, no call
        result = evertalk(home, url, "memory", "compact")
        assert result.returncode == 0, result.stderr
        assert result.stderr.strip().splitlines() == [f"[{'#' * 24}] built 0/0 · calls 0 · $0.0000"]
        assert fake.totals.requests == 63


@pytest.mark.parametrize("how", ["stopped", "killed"])
def test_a_service_that_goes_ends_the_command_in_one_line(home: Path, how: str) -> None:
    make_chat(home, 16, (1_000, 2_000), seed=6)
    chat_dir = home / "chat"
    with served(home, paced(0.02)) as url:
        process = start(home, url, "memory", "compact")
        try:
            wait_until(lambda: len(model_built(chat_dir)) >= 2, "the first summaries")
            pid = service_pid(home)
            assert pid is not None
            if how == "stopped":
                assert evertalk(home, url, "service", "stop").returncode == 0
            else:
                os.kill(pid, signal.SIGKILL)
            out, err = process.communicate(timeout=60)
        finally:
            if process.poll() is None:
                process.kill()
    assert (process.returncode, out) == (1, ""), err
    why = "was stopped (asked by stop " if how == "stopped" else "went away; "
    assert err.startswith(f"evertalk: the service {why}") and err.count("\n") == 1, err
    assert err.endswith(
        "the summaries built so far are kept (evertalk memory compact goes on from there)\n"
    )


def test_compact_beside_a_running_turn_is_served_by_the_same_service(home: Path) -> None:
    """A `-p` turn holds the service when `memory compact` comes: the command is served, not
    refused, and stops nothing; the turn ends with its answer."""
    make_chat(home, 16, (1_000, 2_000), seed=5)
    turns: list[Call] = []

    def is_turn(call: Call) -> bool:
        if call.body.get("tool_choice") in ({"type": "none"}, "none"):
            return False
        turns.append(call)
        return True

    script = Script(summarizer(300)).route(is_turn, slow(2.0, answer("the turn's answer")))
    fake = AnthropicFake(script)
    with served(home, fake) as url:
        turn = start(home, url, "-p", "a short question")
        try:
            wait_until(lambda: bool(turns), "the turn's call")
            pid = service_pid(home)
            result = evertalk(home, url, "memory", "compact")
            out, err = turn.communicate(timeout=60)
        finally:
            if turn.poll() is None:
                turn.kill()
        assert result.returncode == 0, result.stderr
        assert "stopping the service" not in result.stderr
        assert re.search(r"built (\d+)/\1 · ", result.stderr.strip().splitlines()[-1])
        assert (turn.returncode, out) == (0, "the turn's answer\n"), err
        assert service_pid(home) == pid
        assert memory_status(home)["unbuilt"] == 0


def test_a_failed_node_is_a_warning_line_of_its_own(home: Path) -> None:
    make_chat(home, 8, (1_000, 2_000), seed=4)
    script = Script(summarizer(300))
    script.route(lambda call: re.match(r"\w+: m3 ", call.input_text) is not None, empty())
    with served(home, AnthropicFake(script)) as url:
        process = start(home, url, "memory", "compact")
        lines: list[str] = []
        assert process.stderr is not None
        reader = threading.Thread(target=lambda: lines.extend(process.stderr or ()), daemon=True)
        reader.start()
        try:
            deadline = time.monotonic() + 30
            while not any(line.startswith("memory:") for line in lines):
                assert process.poll() is None, lines
                assert time.monotonic() < deadline, "no warning came"
                time.sleep(0.05)
        finally:
            process.send_signal(signal.SIGINT)  # the failed node would be tried again in 10 s
            process.wait(timeout=30)
            reader.join(timeout=10)
    assert process.returncode == 130
    assert lines[0] == (
        "memory: 3+1 could not be summarized (the model gave no usable line); "
        "it will be tried again\n"
    )
    assert lines[-1].startswith("stopped watching: ") and len(lines) == 2


# -- catching up --------------------------------------------------------------------------------


def free_message_chat(home: Path, count: int) -> None:
    """Messages that are their own free leaves (506 bytes with `user: `), no two of them a free
    parent: an import of short messages. 300 of them make a view of 151,800 bytes, over its
    ceiling of 128,000, that no batch can shrink until parents are built."""
    with Chat.open(home / "chat") as chat:
        for k in range(count):
            chat.append("user", f"m{k:04d} " + "w" * 494)


def saved_views(chat_dir: Path) -> dict[str, object]:
    loaded: dict[str, object] = json.loads((chat_dir / "view.json").read_text())
    return loaded


def test_compact_says_it_is_catching_up_and_ends_with_the_view_under_its_ceiling(
    home: Path,
) -> None:
    free_message_chat(home, 300)
    chat_dir = home / "chat"
    assert saved_views(chat_dir)["shrinking"] is True
    fake = AnthropicFake(summarizer(300))
    with served(home, fake) as url:
        result = evertalk(home, url, "memory", "compact")
        assert result.returncode == 0, result.stderr
        lines = result.stderr.strip().splitlines()
        # said at the first answer: the service may have built a few summaries by then
        caught = re.fullmatch(
            r"catching up: ([\d,]+) summaries to go, (about \d+ min|less than a minute)", lines[0]
        )
        assert caught and 0 < int(caught[1].replace(",", "")) <= 296, lines
        assert re.fullmatch(r"the view merged down from 151,800 to [\d,]+ bytes", lines[-2]), lines
        assert "built 296/296" in lines[-1]
        assert fake.totals.requests == 296

        saved = saved_views(chat_dir)
        assert saved["shrinking"] is False and saved["cshrinking"] is False
        with Chat.open(chat_dir, readonly=True) as chat:  # the saved views reopen as they are
            assert chat.warnings == []
            assert chat.core.view.size <= 64_000 and chat.core.cview.size <= 16_000
            assert json.loads(json.dumps(chat.core.saved().view)) == saved["view"]
            assert json.loads(json.dumps(chat.core.saved().cview)) == saved["cview"]
        status = evertalk(home, UNUSED_URL, "memory", "status")
        assert "catching up" not in status.stdout and "steady" in status.stdout


def test_compact_with_nothing_to_build_still_ends_a_waiting_batch(home: Path) -> None:
    """A chat left shrinking by an earlier run: every node built, the view still over its
    ceiling until the next message. No call is needed to merge it."""
    free_message_chat(home, 300)
    with Chat.open(home / "chat") as chat:
        while ready := chat.core.ready():
            chat.build(ready[0], "x" * 300)
        assert chat.core.view.shrinking and chat.core.view.size == 151_800
    result = evertalk(home, UNUSED_URL, "memory", "compact")
    assert result.returncode == 0, result.stderr
    lines = result.stderr.strip().splitlines()
    assert re.fullmatch(r"the view merged down from 151,800 to [\d,]+ bytes", lines[0]), lines
    assert "built 0/0" in lines[-1] and len(lines) == 2
    saved = saved_views(home / "chat")
    assert saved["shrinking"] is False
    again = evertalk(home, UNUSED_URL, "memory", "compact")
    assert again.stderr.strip().splitlines() == [lines[-1]]  # nothing left to do


FORBIDDEN = ("anthropic", "openai", "httpx", "textual", "anyio")
FORBIDDEN_EVERTALK = ("evertalk.agent", "evertalk.compactor", "evertalk.providers")


def test_the_command_loads_neither_the_agent_nor_a_model_sdk(home: Path) -> None:
    """The service has them loaded: the command is a client, and starts as fast as one."""
    free_message_chat(home, 1)  # its one node is free: no call to make
    script = (
        "import sys\n"
        "from evertalk.cli import main\n"
        "assert main(['memory', 'compact']) == 0\n"
        "print(' '.join(sorted(sys.modules)))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script],
        env=environment(home, UNUSED_URL),
        capture_output=True,
        text=True,
        timeout=60,
        cwd=home,
    )
    assert result.returncode == 0, result.stderr
    assert "built 0/0" in result.stderr
    loaded = result.stdout.split()
    assert "evertalk.compact_cli" in loaded and "evertalk.client.connection" in loaded
    assert [name for name in loaded if name.split(".")[0] in FORBIDDEN] == []
    assert [name for name in loaded if name.startswith(FORBIDDEN_EVERTALK)] == []
