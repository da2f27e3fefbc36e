"""Generate a chat directory of N messages with every node built, as a long-lived chat has.

The pure core decides which nodes exist and which are free; the files are written in bulk
in the formats of SPEC §1.2, §2.2 and §3.6, the way years of appends would have left them.
"""

from __future__ import annotations

import json
import os
import random
from contextlib import ExitStack
from pathlib import Path

from evertalk.memory import MemoryCore
from evertalk.memory.text import utf8_len

DAYS = ("2026-11-28", "2026-11-29", "2026-11-30")


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
    rng = random.Random(seed)
    for folder in (chat_dir, chat_dir / "main", chat_dir / "tree"):
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    words = [
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
    ]
    core = MemoryCore()
    tree = core.tree
    per_day = count // len(DAYS) + 1
    with ExitStack() as files:
        main_files = {
            day: files.enter_context(open(chat_dir / "main" / f"{day}.jsonl", "w")) for day in DAYS
        }
        tree_file = files.enter_context(open(chat_dir / "tree" / f"{DAYS[-1]}.jsonl", "w"))
        for t in range(count):
            day = DAYS[t // per_day]
            kind = ("user", "ever", "tool", "echo")[t % 4]
            text = " ".join(rng.choices(words, k=rng.choice((3, 12, 60, 110))))
            main_files[day].write(_message_line(t, kind, text, day))
            for built in core.append(kind, text):
                tree_file.write(_node_line(built.level, built.index, built.text, built.flag))
            pending = [] if tree.built_at(0, t) else [(0, t)]
            while pending or (pending := _next_merge(core)):
                node = pending.pop()
                line = f"summary of {node}: " + " ".join(
                    rng.choices(words, k=rng.randrange(20, 45))
                )
                tree_file.write(_node_line(node[0], node[1], line, 1))
                for built in core.build(node, line):
                    tree_file.write(_node_line(built.level, built.index, built.text, built.flag))
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


def _next_merge(core: MemoryCore) -> list[tuple[int, int]]:
    merge = core.queues.first_merge(core.tree)
    return [] if merge is None else [merge]
