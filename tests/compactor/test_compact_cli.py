"""`evertalk memory compact` end to end: a real process, the real SDK, a loopback fake (SPEC §4).

The fake listens on 127.0.0.1 in a thread of the test process; the command finds it through
ANTHROPIC_BASE_URL, as a user's proxy would be found. The chats are made here with the real
Chat, closed, then handed to the command.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

from test_service import tree_records

from evertalk.chat import Chat
from evertalk.ledger import ledger_path, read_records
from fakes import AnthropicFake, Script, SwitchApp, empty, serve, slow, summarizer

KEY = "sk-ant-api03-compact-cli-tests-SECRET-91b2e0"
MODEL = "claude-haiku-4-5"
EVERTALK = [sys.executable, "-m", "evertalk"]
UNUSED_URL = "http://127.0.0.1:9"  # discard port: nothing listens there

_WORDS = """
backup rsync cron nightly notes log rotate disk quota naïve café 日本語 straße ключ deploy branch
rebase merge conflict test fixture timeout retry socket proxy cache token python anyio httpx
"""
WORDS = _WORDS.split()


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
    )


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


def node_of_name(name: str) -> tuple[int, int]:
    start, count = (int(part) for part in name.split("+"))
    return (count.bit_length() - 1, start // count)


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


def start_compact(home: Path, url: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*EVERTALK, "memory", "compact"],
        env=environment(home, url),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for_built(process: subprocess.Popen[str], chat_dir: Path, count: int) -> None:
    deadline = time.monotonic() + 30
    while len(model_built(chat_dir)) < count:
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, "the compactor built too little"
        time.sleep(0.05)


def test_compact_without_a_chat_fails_in_one_line(home: Path) -> None:
    result = evertalk(home, UNUSED_URL, "memory", "compact")
    line = one_line_error(result)
    assert "no chat" in line
    assert not (home / "chat").exists()


def test_a_wrong_key_fails_in_one_line_and_never_shows_the_key(home: Path) -> None:
    make_chat(home, 12, (1_000, 2_000), seed=2)
    fake = AnthropicFake(summarizer(300), api_key="the-right-key")
    with serve(fake) as url:
        result = evertalk(home, url, "memory", "compact")
    line = one_line_error(result)
    assert "cannot be used" in line and "key" in line.lower(), line
    assert fake.records and all(r.status == 401 for r in fake.records)
    assert model_built(home / "chat") == {}
    assert not any(r.get("cut") for r in tree_records(home / "chat"))
    assert_no_key(home, result.stdout, result.stderr)


def test_stopped_and_killed_compactions_end_with_every_node_built_once(home: Path) -> None:
    """Ctrl+C, then kill -9, each mid-way; then a run to the end, then one with nothing to do."""
    make_chat(home, 64, (1_000, 3_000), seed=3)  # no free node: 64 leaves and 63 merges to build
    chat_dir = home / "chat"
    outputs: list[str] = []
    # about a second per call (the response starts at once, then trickles), 8 at a time
    slow_fake = AnthropicFake(slow(0.0, summarizer(300), chunk_delay=0.05), text_chunk=16)
    app = SwitchApp(slow_fake)
    with serve(app) as url:
        # Ctrl+C: a clean stop that keeps what was built
        process = start_compact(home, url)
        try:
            wait_for_built(process, chat_dir, 8)
        finally:
            process.send_signal(signal.SIGINT)
            out, err = process.communicate(timeout=30)
        outputs += [out, err]
        stopped = model_built(chat_dir)
        assert process.returncode == 130, err
        assert f"stopped; the {len(stopped)} lines built so far are kept" in err

        # kill -9, with `memory status` from another process while it runs
        process = start_compact(home, url)
        try:
            wait_for_built(process, chat_dir, len(stopped) + 8)
            status = evertalk(home, url, "memory", "status")
            assert status.returncode == 0, status.stderr
            assert f"compactor running in pid {process.pid}" in status.stdout
            assert process.poll() is None, "it finished before the kill"
        finally:
            os.kill(process.pid, signal.SIGKILL)
            out, err = process.communicate(timeout=30)
        outputs += [out, err, status.stdout, status.stderr]
        assert process.returncode == -signal.SIGKILL
        before = model_built(chat_dir)
        assert stopped.items() <= before.items() and len(before) < 64 + 63
        calls_before = len(read_records(ledger_path(home)).records)
        status = evertalk(home, url, "memory", "status")
        assert "compactor not running" in status.stdout, status.stdout

        # again, to the end
        app.current = fake = AnthropicFake(summarizer(300))
        result = evertalk(home, url, "memory", "compact")
        outputs += [result.stdout, result.stderr]
        assert result.returncode == 0, result.stderr
        assert_built_once(chat_dir, 64)
        left = 64 + 63 - len(before)
        last = result.stderr.strip().splitlines()[-1]
        assert re.search(rf"built {left}/{left} · calls {left} · \$\d+\.\d{{4}}", last), last
        assert fake.totals.requests == left

        # and once more: nothing to do, no call
        started = time.monotonic()
        result = evertalk(home, url, "memory", "compact")
        outputs += [result.stdout, result.stderr]
        assert result.returncode == 0, result.stderr
        assert time.monotonic() - started < 15
        assert "built 0/0" in result.stderr.strip().splitlines()[-1]
        assert fake.totals.requests == left

    assert_built_once(chat_dir, 64)
    after = model_built(chat_dir)
    assert before.items() <= after.items()  # nothing built before was lost or rebuilt
    records = read_records(ledger_path(home)).records
    assert {r.role for r in records} == {"compaction"} and {r.model for r in records} == {MODEL}
    again = [node_of_name(r.node) for r in records[calls_before:] if r.node]
    assert len(again) == left and set(again) == after.keys() - before.keys()
    assert_no_key(home, *outputs)


def test_a_failed_node_is_a_warning_line_of_its_own(home: Path) -> None:
    make_chat(home, 8, (1_000, 2_000), seed=4)
    script = Script(summarizer(300))
    script.route(lambda call: re.match(r"\w+: m3 ", call.input_text) is not None, empty())
    with serve(AnthropicFake(script)) as url:
        process = start_compact(home, url)
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
    assert lines[-1].startswith("stopped; the ") and len(lines) == 3  # and the stop's newline


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
    with serve(fake) as url:
        result = evertalk(home, url, "memory", "compact")
    assert result.returncode == 0, result.stderr
    lines = result.stderr.strip().splitlines()
    assert re.fullmatch(r"catching up: 296 summaries to go, about \d+ min", lines[0]), lines
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
