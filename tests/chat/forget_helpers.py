"""Helpers for the tests of forgetting: a chat over several days whose tree a fake compactor
builds (it copies the words that begin with `zq` into every summary above them), and a scan of
every byte under the home."""

from __future__ import annotations

import base64
from datetime import datetime, timedelta, timezone
from pathlib import Path

from evertalk.chat import Chat
from evertalk.memory import Budget
from evertalk.memory.text import cut_utf8
from home_scan import files_with

TZ = timezone(timedelta(hours=1))
DAYS = [datetime(2026, 3, d, 9, 0, tzinfo=TZ) for d in (2, 3, 4, 5)]
SMALL = Budget(ceiling=3_000, floor=1_500, cceiling=1_200, cfloor=600, window=8)
FILLER = "the deploy script now checks the disk before it copies the build; " * 9


def message_text(k: int, word: str | None = None) -> str:
    """Message k: long enough to need a summary every third message, else short."""
    body = f"note {k} about the release " + (FILLER if k % 3 == 0 else "")
    return f"{word} {body}" if word else body


def summary(node_input: str) -> str:
    """The fake compactor's line: every word that begins with `zq` first, then the input's
    start, cut to fit one line."""
    remembered = [word for word in node_input.split() if word.startswith("zq")]
    return cut_utf8(" ".join([*remembered, "summary:", node_input]).replace("\n", " "), 400)


def build_all(chat: Chat) -> int:
    """Build every node the core offers until none is left; how many were built."""
    built = 0
    while ready := chat.core.ready():
        for node in ready:
            chat.build(node, summary(chat.core.tree.input_of(node)))
            built += 1
    return built


def make_chat(home: Path, count: int = 40, words: dict[int, str] | None = None) -> Path:
    """`count` messages over four day files, message k holding words[k] first; every node
    built."""
    chat_dir = home / "chat"
    words = words or {}
    with Chat.open(chat_dir, budget=SMALL) as chat:
        for k in range(count):
            date = DAYS[k * len(DAYS) // count]
            chat.append("user" if k % 2 else "ever", message_text(k, words.get(k)), date=date)
            build_all(chat)
    return chat_dir


def forms(word: str) -> list[bytes]:
    """The word's bytes and its hex and base64 forms."""
    data = word.encode("utf-8")
    return [
        data,
        data.hex().encode(),
        data.hex().upper().encode(),
        base64.b64encode(data).rstrip(b"="),
        base64.urlsafe_b64encode(data).rstrip(b"="),
    ]


def files_holding(home: Path, word: str) -> list[str]:
    """Every file under `home` any of whose bytes spell the word in one of its forms."""
    return files_with(home, set(forms(word)))
