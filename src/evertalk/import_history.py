"""What the home's past says about an import's cost: the compactor's measured calls per node
(follow-ups, retries and rejected replies included) and cost per call, from the ledger (the
current compactor model's, else the calls per node of all the chat's compactor models); and
which of the messages found are in the chat already (their keys, in the key index or in the log
written after its checkpoint), which cost nothing.

Standard library only, like `import_cli.py`: the preview must come fast.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterable
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from evertalk.ledger import UsageRecord, ledger_path, read_records

MEASURED_NODES: Final = 16
"""Built nodes of the compactor model before its measured figures replace the defaults: a few
nodes say little about the share of follow-ups."""
KEYS_DB: Final = ("chat", "index", "keys.db")


@dataclass(frozen=True)
class Measured:
    """The compactor model's figures in the ledger."""

    calls_per_node: float
    cost_per_call: float | None  # USD; None when no call of it was priced


def measured(home: Path, provider: str, model: str) -> Measured | None:
    """The figures of this compactor model's compaction calls; with too few of them, the calls
    per node of every compactor model the chat had (a price is a model's own: none then); None
    with too little history (or no readable ledger)."""
    try:
        records = read_records(ledger_path(home)).records
    except OSError:
        return None
    compactions = [r for r in records if r.role == "compaction"]
    own = measure(r for r in compactions if r.model == model and r.provider == provider)
    if own is not None:
        return own
    every = measure(compactions)
    return None if every is None else Measured(every.calls_per_node, None)


def measure(calls: Iterable[UsageRecord]) -> Measured | None:
    count = priced = 0
    cost = 0.0
    nodes: set[str] = set()
    for record in calls:
        count += 1
        if record.cost is not None:
            priced += 1
            cost += record.cost
        if record.node is not None and not record.failed and record.rejected is None:
            nodes.add(record.node)
    if len(nodes) < MEASURED_NODES:
        return None
    return Measured(count / len(nodes), cost / priced if priced else None)


def in_chat(home: Path, keys: list[str]) -> set[str]:
    """Those of `keys` the chat holds already: in its key index (as of the index's last
    checkpoint), or in the lines of the log written after it. Empty when there is no chat;
    an index that cannot be read counts nothing as held (the estimate then errs high)."""
    chat = home / "chat"
    wanted = set(keys)
    if not wanted or not (chat / "main").is_dir():
        return set()
    scanned = _scanned(chat / "index" / "meta.json")
    found = _in_index(chat.joinpath(*KEYS_DB[1:]), wanted)
    for path in sorted((chat / "main").glob("*.jsonl")):
        found |= _in_tail(path, scanned.get(f"main/{path.name}", 0), wanted)
    return found


def _scanned(meta: Path) -> dict[str, int]:
    """Per log file, the bytes the index reflects (what its checkpoint scanned)."""
    try:
        files = json.loads(meta.read_text())["files"]
        return {name: int(state["scanned"]) for name, state in files.items()}
    except (OSError, ValueError, KeyError, TypeError):
        return {}


def _in_index(path: Path, wanted: set[str]) -> set[str]:
    if not path.is_file():
        return set()
    names = sorted(wanted | {f"{key}.0" for key in wanted})  # a long message's first page
    found: set[str] = set()
    try:
        with closing(sqlite3.connect(f"{path.as_uri()}?mode=ro", uri=True)) as conn:
            for start in range(0, len(names), 500):
                chunk = names[start : start + 500]
                marks = ",".join("?" * len(chunk))
                rows = conn.execute(f"SELECT key FROM keys WHERE key IN ({marks})", chunk)
                found.update(_base(str(row[0]), wanted) for row in rows)
    except sqlite3.Error:
        return set()
    return found - {""}


def _in_tail(path: Path, start: int, wanted: set[str]) -> set[str]:
    """The wanted keys in the records of a log file from byte `start` on."""
    found: set[str] = set()
    try:
        with open(path, "rb") as file:
            file.seek(start)
            for raw in file:
                if b'"key"' not in raw:
                    continue
                try:
                    key = json.loads(raw).get("key")
                except (ValueError, RecursionError, AttributeError):
                    continue
                if isinstance(key, str):
                    found.add(_base(key, wanted))
    except OSError:
        return set()
    return found - {""}


def _base(key: str, wanted: set[str]) -> str:
    """The wanted key a logged one stands for (a page of a long message adds `.n`), or ""."""
    if key in wanted:
        return key
    head, _, page = key.rpartition(".")
    return head if page.isdigit() and head in wanted else ""
