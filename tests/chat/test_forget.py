"""`evertalk memory forget` (SPEC §12): a message holding a unique word, in a chat whose tree is
built, leaves no trace of that word in any file under the home; its summaries are built again."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest
from forget_helpers import SMALL, build_all, files_holding, make_chat, message_text

from evertalk.chat import Chat
from evertalk.cli import main
from evertalk.memory.nodes import Node, exists
from evertalk.store.search_index import SearchIndex
from tui.tui_support import MEMORY_MODEL, write_config

WORD = "zqmarigold7731"
TARGET = 13


def _copies(chat_dir: Path) -> None:
    """The other places the word may lie: a repair's copy of its day file, a tree line set
    aside, a subagent's log, a held message, and an image of the message."""
    day = next(p for p in sorted((chat_dir / "main").iterdir()) if WORD in p.read_text())
    (chat_dir / "damaged" / "2026-03-06T100000" / "main").mkdir(parents=True)
    (chat_dir / "damaged" / "2026-03-06T100000" / "main" / day.name).write_bytes(day.read_bytes())
    (chat_dir / "quarantine").mkdir()
    tree_line = {"l": 0, "i": 99, "text": f"user: {message_text(TARGET, WORD)}", "size": 1}
    (chat_dir / "quarantine" / "tree-x.jsonl").write_text(json.dumps(tree_line) + "\n")
    (chat_dir / "agents" / "Scout").mkdir(parents=True)
    record = {"i": 0, "kind": "user", "text": message_text(TARGET, WORD), "size": 1, "date": "x"}
    (chat_dir / "agents" / "Scout" / "2026-03-03.jsonl").write_text(json.dumps(record) + "\n")
    held = {"key": "k1", "kind": "user", "text": message_text(TARGET, WORD), "date": "x"}
    (chat_dir / "held.jsonl").write_text(json.dumps(held) + "\n")


def _over(node: Node, target: int) -> bool:
    level, index = node
    return index << level <= target < (index + 1) << level


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    chat_dir = make_chat(home, words={TARGET: WORD})
    with Chat.open(chat_dir, budget=SMALL) as chat:
        (chat_dir / "images").mkdir()
        (chat_dir / "images" / "a1.png").write_bytes(b"\x89PNG " + WORD.encode())
        chat.append("user", f"{WORD} again, with a picture", images=["a1.png"])
        build_all(chat)
        search = SearchIndex.open(chat_dir)
        search.catch_up(chat.store)
        search.close()
    _copies(chat_dir)
    return home


def test_a_forgotten_word_is_in_no_file_under_the_home(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    chat_dir = home / "chat"
    before = files_holding(home, WORD)
    assert "index/search.sqlite" in " ".join(before) and "chat/images/a1.png" in before
    with Chat.open(chat_dir, readonly=True) as chat:
        t = chat.t
        assert sum(WORD in (chat.text_of((k, TARGET >> k)) or "") for k in range(4)) >= 3
        others = {i: chat.store.read_message(i) for i in range(t) if i not in (TARGET, t - 1)}

    assert main(["memory", "forget", str(TARGET), "--home", str(home), "--yes"]) == 0
    assert (
        main(["memory", "forget", str(t - 1), "--reason", "a key", "--home", str(home), "--yes"])
        == 0
    )
    assert files_holding(home, WORD) == []

    capsys.readouterr()
    assert main(["memory", "zoom", str(TARGET), "1", "--home", str(home)]) == 0
    assert capsys.readouterr().out.startswith(f"{TARGET}+1|user: [forgotten on ")
    with Chat.open(chat_dir, budget=SMALL) as chat:
        last = chat.store.read_message(t - 1)
        assert last.text.endswith(": a key]") and last.images is None
        assert {i: chat.store.read_message(i) for i in others} == others
        unbuilt = [
            (level, i)
            for level, row in enumerate(chat.core.tree.flags)
            for i, flag in enumerate(row)
            if not flag
        ]
        assert unbuilt and all(_over(n, TARGET) or _over(n, t - 1) for n in unbuilt)
        build_all(chat)
        assert all(flag for row in chat.core.tree.flags for flag in row)
        for level in range(t.bit_length()):
            node = (level, TARGET >> level)
            if exists(node, t):
                assert WORD not in (chat.text_of(node) or "")
        assert WORD not in chat.render_view() and WORD not in chat.render_cview()
    assert files_holding(home, WORD) == []


def test_forget_asks_first_and_changes_nothing_on_no(
    home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr("sys.stdin", __import__("io").StringIO("n\n"))
    before = {p: p.read_bytes() for p in home.rglob("*") if p.is_file()}
    assert main(["memory", "forget", f"{TARGET}-{TARGET + 1}", "--home", str(home)]) == 1
    out = capsys.readouterr().out
    assert f"Messages that change: {TARGET}–{TARGET + 1}" in out
    assert "prompt cache" in out and "model calls" in out
    after = {p: p.read_bytes() for p in home.rglob("*") if p.is_file()}
    assert {p: after[p] for p in before if "index" not in p.parts} == {
        p: before[p] for p in before if "index" not in p.parts
    }


def test_redact_changes_only_the_occurrences(tmp_path: Path) -> None:
    secret = "zqhunter2-swordfish"
    words = {4: secret, 9: secret, 21: secret}
    home = tmp_path / "home"
    chat_dir = make_chat(home, count=30, words=words)
    with Chat.open(chat_dir, readonly=True) as chat:
        before = {i: chat.store.read_message(i) for i in range(chat.t)}
        held = [n for n in _built(chat) if secret in (chat.text_of(n) or "")]
    assert len(held) > 3  # the summaries above the three messages copied it

    assert main(["memory", "redact", secret, "--yes", "--home", str(home)]) == 0
    with Chat.open(chat_dir, budget=SMALL) as chat:
        for i, record in before.items():
            now = chat.store.read_message(i)
            if i in words:
                assert now.text == record.text.replace(secret, "[redacted]")
                assert (now.i, now.kind, now.date, now.key) == (i, record.kind, record.date, None)
            else:
                assert now == record
        assert all(secret not in (chat.text_of(n) or "") for n in held)  # unbuilt, or anew
        assert any(not chat.core.tree.is_built(n) for n in held)
        build_all(chat)
        assert not [n for n in _built(chat) if secret in (chat.text_of(n) or "")]
    assert files_holding(home, secret) == []


def _built(chat: Chat) -> list[Node]:
    tree = chat.core.tree
    return [(lv, i) for lv, row in enumerate(tree.flags) for i, flag in enumerate(row) if flag]


def test_the_preview_prices_the_summaries_built_again(
    home: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def cost_line() -> str:
        monkeypatch.setattr("sys.stdin", io.StringIO("n\n"))
        assert main(["memory", "forget", str(TARGET), "--home", str(home)]) == 1
        out = capsys.readouterr().out.splitlines()
        return next(line for line in out if "model calls" in line)

    write_config(home)  # its compactor model is in the price table
    assert re.search(r"\(about \$\d+\.\d\d\)|\(under \$0\.01\)", cost_line())
    config = (home / "config.toml").read_text().replace(MEMORY_MODEL, "a-model-of-our-own")
    (home / "config.toml").write_text(config)
    assert "(price unknown)" in cost_line()
