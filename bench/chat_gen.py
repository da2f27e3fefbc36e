"""Generate a chat directory of N messages with every node built, as a long-lived chat has.

The pure core decides which nodes exist and which are free; the files are written in bulk
in the formats of SPEC §1.2, §2.2 and §3.6, the way years of appends would have left them.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TextIO

from evertalk.memory import MemoryCore
from evertalk.memory.text import utf8_len

DAYS = ("2026-11-28", "2026-11-29", "2026-11-30")
WORDS = (
    "the",
    "log",
    "rotate",
    "backup",
    "notes",
    "file",
    "error",
    "fixed",
    "config",
    "tests",
    "view",
    "merge",
)


def _message_line(i: int, kind: str, text: str, day: str) -> str:
    record = {"i": i, "kind": kind, "text": text, "size": utf8_len(text)}
    record["date"] = f"{day}T{(i // 3600) % 24:02d}:{(i // 60) % 60:02d}:{i % 60:02d}+00:00"
    return json.dumps(record, ensure_ascii=False) + "\n"


def _node_line(level: int, index: int, text: str, flag: int) -> str:
    record: dict[str, object] = {"l": level, "i": index, "text": text, "size": utf8_len(text)}
    if flag == 2:
        record["free"] = True
    return json.dumps(record, ensure_ascii=False) + "\n"


def generate(chat_dir: Path, count: int, seed: int = 3) -> None:
    """`count` messages over the three DAYS, every tree line in the last day's tree file."""
    per_day = count // len(DAYS) + 1
    write_chat(
        chat_dir,
        count,
        rng=random.Random(seed),
        words=WORDS,
        day_of=lambda t: DAYS[t // per_day],
        tree_day=lambda day: DAYS[-1],
        summary_words=lambda rng: rng.randrange(20, 45),
    )


def write_chat(
    chat_dir: Path,
    count: int,
    *,
    rng: random.Random,
    words: Sequence[str],
    day_of: Callable[[int], str],
    tree_day: Callable[[str], str],
    summary_words: Callable[[random.Random], int],
) -> None:
    """`count` messages of `words` drawn by `rng`, message t in the day file `day_of(t)` (days
    in order), and every node built, its tree line in the tree file of `tree_day(day)`; then
    view.json and the modes evertalk gives its files."""
    for folder in (chat_dir, chat_dir / "main", chat_dir / "tree"):
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    core = MemoryCore()
    with _DayFile(chat_dir / "main") as main, _DayFile(chat_dir / "tree") as tree_file:
        for t in range(count):
            day = day_of(t)
            kind = ("user", "ever", "tool", "echo")[t % 4]
            text = " ".join(rng.choices(words, k=rng.choice((3, 12, 60, 110))))
            main.write(day, _message_line(t, kind, text, day))
            tree = tree_file.day(tree_day(day))
            for built in core.append(kind, text):
                tree.write(_node_line(built.level, built.index, built.text, built.flag))
            pending = [] if core.tree.built_at(0, t) else [(0, t)]
            while pending or (pending := _next_merge(core)):
                node = pending.pop()
                line = f"summary of {node}: " + " ".join(rng.choices(words, k=summary_words(rng)))
                tree.write(_node_line(node[0], node[1], line, 1))
                for built in core.build(node, line):
                    tree.write(_node_line(built.level, built.index, built.text, built.flag))
    saved = core.saved()
    view_json = {
        "t": saved.t,
        "view": [list(n) for n in saved.view],
        "cview": [list(n) for n in saved.cview or []],
        "shrinking": saved.shrinking,
        "cshrinking": saved.cshrinking,
    }
    (chat_dir / "view.json").write_text(json.dumps(view_json))
    for path in chat_dir.rglob("*"):
        os.chmod(path, 0o700 if path.is_dir() else 0o600)


class _DayFile:
    """The day files of one folder, written in order of days: one open at a time."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.name: str | None = None
        self.file: TextIO | None = None

    def day(self, day: str) -> TextIO:
        if day != self.name or self.file is None:
            self.close()
            self.name, self.file = day, open(self.folder / f"{day}.jsonl", "w")  # noqa: SIM115
        return self.file

    def write(self, day: str, line: str) -> None:
        self.day(day).write(line)

    def close(self) -> None:
        if self.file is not None:
            self.file.close()
            self.file = None

    def __enter__(self) -> _DayFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _next_merge(core: MemoryCore) -> list[tuple[int, int]]:
    merge = core.queues.first_merge(core.tree)
    return [] if merge is None else [merge]


def generated_once(out: Path, count: int) -> Path:
    """The chat folder of a generated `count`-message chat under `out`, made the first time
    only (a million messages take a while): the benches share it."""
    chat_dir = out / f"chat-{count}" / "chat"
    if not (chat_dir / "view.json").exists():
        shutil.rmtree(chat_dir.parent, ignore_errors=True)
        started = time.perf_counter()
        generate(chat_dir, count)
        print(f"generated a {count:,}-message chat in {time.perf_counter() - started:.0f} s")
    return chat_dir
