"""Forgetting one message in a big chat (SPEC §12): the time it takes apart from model calls (the
target is 1 s at a million messages: one day file and the tree records over the message are
rewritten, the index follows those files alone), the open after it (the index is trusted, not
built again), the model calls that build the summaries again, and what the next turn writes to
the prompt cache.

The chat is generated as a long-lived one is laid out: a day file of messages per day, the tree
lines of each day in that day's tree file (chat_gen puts a million messages in three days,
which a forget would rewrite whole). It is built once under bench/out and copied for each run,
its index and search database made first, as a chat in use has them.

`python -m bench.forget_bench [MESSAGES]` runs it alone.
"""

from __future__ import annotations

import os
import random
import shutil
import sys
import time
from dataclasses import dataclass
from datetime import date, timedelta
from pathlib import Path

from bench.chat_gen import write_chat
from evertalk.chat import Chat
from evertalk.forget_cli import forget_plan
from evertalk.memory.text import utf8_len
from evertalk.providers.base import Usage
from evertalk.providers.prices import cost
from evertalk.store.forget import apply
from evertalk.store.search_index import SEARCH_NAME, SearchIndex

OUT = Path(__file__).with_name("out")
PER_DAY = 3_000
"""Messages a day: a busy user's agent, tool calls and their echoes included."""
TARGET_S = 1.0
TURN_MODEL = ("anthropic", "claude-sonnet-5-5")
"""The default turn model, whose price the next turn's cache write is given at."""
BYTES_PER_TOKEN = 4
WORDS = ("the", "log", "rotate", "backup", "notes", "file", "error", "fixed", "config", "tests")


@dataclass
class ForgetFigures:
    messages: int
    files: int
    forget_s: float
    """Plan and apply, search database included."""
    search_s: float
    """Of which: the search database's rows (from a second forget without it)."""
    reopen_ms: float
    dropped: int
    calls: int
    """Model calls that built the summaries again, follow-ups aside."""
    cache_bytes: int

    def lines(self) -> list[str]:
        tokens = self.cache_bytes // BYTES_PER_TOKEN
        write = cost(*TURN_MODEL, Usage(cache_write=tokens)) or 0.0
        mark = "ok" if self.forget_s <= TARGET_S else "OVER"
        return [
            f"forget one message at {self.messages:,} messages ({self.files} day files): "
            f"{self.forget_s:.2f} s (target {TARGET_S:g} s: {mark}), of which the search database "
            f"{self.search_s:.2f} s; open after it {self.reopen_ms:.0f} ms (index "
            "kept)",
            f"forget: {self.dropped} summaries dropped, {self.calls} model calls to build them "
            f"again (2·log2 T = {2 * self.messages.bit_length()}); next turn's cache "
            f"write {self.cache_bytes:,} B ≈ {tokens:,} tokens, ${write:.3f} at "
            f"{TURN_MODEL[1]}",
        ]


def run(count: int) -> ForgetFigures:
    source = _prepared(count)
    scratch = OUT / f"forget-{count}-run"
    shutil.rmtree(scratch, ignore_errors=True)
    shutil.copytree(source, scratch)
    chat_dir = scratch / "chat"
    try:
        target = count // 2
        with Chat.open(chat_dir) as chat:
            before = _lines(chat)
            started = time.perf_counter()
            plan = forget_plan(chat.store, target, target, None)
            apply(chat.store, plan)
            forget_s = time.perf_counter() - started
            chat.store.close()
        started = time.perf_counter()
        with Chat.open(chat_dir) as chat:
            reopen_ms = (time.perf_counter() - started) * 1e3
            after = _lines(chat)
            calls = _build_all(chat)
        with Chat.open(chat_dir) as chat:
            (chat_dir / "index" / SEARCH_NAME).unlink()
            started = time.perf_counter()
            again = forget_plan(chat.store, target + PER_DAY, target + PER_DAY, None)
            apply(chat.store, again)
            without_search = time.perf_counter() - started
            chat.store.close()
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return ForgetFigures(
        count,
        len(os.listdir(source / "chat" / "main")),
        forget_s,
        max(0.0, forget_s - without_search),
        reopen_ms,
        len(plan.dropped),
        calls,
        _changed_bytes(before, after),
    )


def _build_all(chat: Chat) -> int:
    """Build every node that needs a model, as the compactor would; how many there were."""
    calls = 0
    while ready := chat.core.ready():
        for node in ready:
            chat.build(node, f"summary of {node}: " + " ".join(WORDS))
            calls += 1
    return calls


def _lines(chat: Chat) -> list[str]:
    """The view's lines as the next turn sends them."""
    return chat.render_view().splitlines(keepends=True)


def _changed_bytes(before: list[str], after: list[str]) -> int:
    """The bytes of the view from its first changed line on: the prompt cache holds the prefix
    before it, and the next turn writes the rest again."""
    same = 0
    for old, new in zip(before, after, strict=False):
        if old != new:
            break
        same += 1
    return sum(utf8_len(line) for line in after[same:])


def _prepared(count: int) -> Path:
    """The generated chat with its index and search database, built once."""
    home = OUT / f"forget-{count}"
    chat_dir = home / "chat"
    if (home / "ready").exists():
        _index(chat_dir)  # a search database of an older version is built again
        return home
    shutil.rmtree(home, ignore_errors=True)
    started = time.perf_counter()
    generate(chat_dir, count)
    _index(chat_dir)
    (home / "ready").touch()
    print(f"generated a {count:,}-message chat by day in {time.perf_counter() - started:.0f} s")
    return home


def _index(chat_dir: Path) -> None:
    with Chat.open(chat_dir) as chat:
        search = SearchIndex.open(chat_dir)
        search.catch_up(chat.store)
        search.close()


def generate(chat_dir: Path, count: int, seed: int = 5) -> None:
    """`count` messages, PER_DAY a day, every node built, each day's tree lines in its file."""
    first_day = date(2026, 1, 1)
    write_chat(
        chat_dir,
        count,
        rng=random.Random(seed),
        words=WORDS,
        day_of=lambda t: (first_day + timedelta(days=t // PER_DAY)).isoformat(),
        tree_day=lambda day: day,
        summary_words=lambda rng: 30,
    )


if __name__ == "__main__":
    for text in run(int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000).lines():
        print(text)
