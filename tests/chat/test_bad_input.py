"""Bad input at the chat level: clear errors or recovery, and nothing logged is lost."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from evertalk.chat import Chat
from evertalk.memory.view import tiles
from evertalk.store.errors import ChatLocked, CorruptLog


def _chat(tmp_path: Path, count: int = 6, pad: int = 0) -> Path:
    chat_dir = tmp_path / "chat"
    with Chat.open(chat_dir) as chat:
        for k in range(count):
            chat.append("user", f"message {k}" + "x" * pad)
    return chat_dir


def _snapshot(chat_dir: Path) -> dict[str, bytes]:
    return {str(p): p.read_bytes() for p in sorted(chat_dir.rglob("*")) if p.is_file()}


def _main_file(chat_dir: Path) -> Path:
    (path,) = (chat_dir / "main").glob("*.jsonl")
    return path


def test_torn_last_line_is_skipped_and_the_next_append_reads_back(tmp_path: Path) -> None:
    chat_dir = _chat(tmp_path)
    with _main_file(chat_dir).open("ab") as log:
        log.write(b'{"i": 6, "kind": "user", "te')
    with Chat.open(chat_dir) as chat:
        assert any("torn" in w or "incomplete" in w or "line 7" in w for w in chat.warnings)
        assert chat.t == 6
        chat.append("user", "after the tear")
    with Chat.open(chat_dir) as chat:
        texts = [chat.store.read_message(i).text for i in range(chat.t)]
        assert texts == [f"message {k}" for k in range(6)] + ["after the tear"]


def test_gap_in_ids_refuses_to_open_and_writes_nothing(tmp_path: Path) -> None:
    chat_dir = _chat(tmp_path)
    record = {
        "i": 9,
        "kind": "user",
        "text": "late",
        "size": 4,
        "date": "2026-11-30T10:00:00+00:00",
    }
    with _main_file(chat_dir).open("a") as log:
        log.write(json.dumps(record) + "\n")
    before = _snapshot(chat_dir)
    with pytest.raises(CorruptLog) as caught:
        Chat.open(chat_dir)
    assert _main_file(chat_dir).name in str(caught.value)
    assert "\n" not in str(caught.value)
    assert _snapshot(chat_dir) == before
    result = subprocess.run(
        [sys.executable, "-m", "evertalk", "memory", "status", "--home", str(tmp_path)],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 1
    assert len(result.stderr.strip().splitlines()) == 1 and "Traceback" not in result.stderr


def test_corrupt_view_json_is_folded_once_with_a_warning(tmp_path: Path) -> None:
    chat_dir = _chat(tmp_path, 40)
    (chat_dir / "view.json").write_text('{"t": 40, "view": [[0, 0], [')
    with Chat.open(chat_dir) as chat:
        assert any("view" in w for w in chat.warnings)
        assert tiles(chat.core.view.nodes(), 40)
        folded = chat.core.saved()
    with Chat.open(chat_dir) as chat:
        assert not chat.warnings
        assert chat.core.saved() == folded


def test_view_json_naming_an_unbuilt_node_is_unreadable(tmp_path: Path) -> None:
    chat_dir = _chat(tmp_path, 4, pad=600)  # no free nodes: (2, 0) stays unbuilt
    bad = {"t": 4, "view": [[2, 0]], "cview": [[2, 0]], "shrinking": False, "cshrinking": False}
    (chat_dir / "view.json").write_text(json.dumps(bad))
    with Chat.open(chat_dir) as chat:
        assert any("unbuilt" in w for w in chat.warnings)
        assert chat.core.view.nodes() == [(0, 0), (0, 1), (0, 2), (0, 3)]


def test_second_process_is_refused_with_the_owners_pid(tmp_path: Path) -> None:
    chat_dir = _chat(tmp_path)
    with Chat.open(chat_dir):
        code = (
            "import sys; from evertalk.chat import Chat; from evertalk.store.errors import "
            f"ChatLocked\ntry:\n    Chat.open(__import__('pathlib').Path({str(chat_dir)!r}))\n"
            "except ChatLocked as e:\n    print(e.pid, e)\n"
        )
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True).stdout
        assert out.split()[0] == str(os.getpid())
        assert "another process" in out
    with Chat.open(chat_dir) as chat:  # the lock went with its owner
        assert chat.t == 6
    assert issubclass(ChatLocked, Exception)


def test_crash_after_message_before_view_json_is_caught_up(tmp_path: Path) -> None:
    chat_dir = _chat(tmp_path, 10)
    saved_before = (chat_dir / "view.json").read_bytes()
    with Chat.open(chat_dir) as chat:
        chat.append("user", "one more")
        expected = chat.core.saved()
    (chat_dir / "view.json").write_bytes(saved_before)  # as if the save never happened
    with Chat.open(chat_dir) as chat:
        assert not chat.warnings
        assert chat.core.saved() == expected
