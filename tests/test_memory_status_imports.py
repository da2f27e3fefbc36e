"""`evertalk memory status` loads only what it reads: run in a fresh interpreter on a chat whose
index is whole and which is caught up, it opens the chat read-only and loads neither the
service's side, nor the app, nor the scanner of the log and its fast decoders (msgspec), nor
the writers of other commands."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from evertalk.chat import Chat

RUN_STATUS = """
import contextlib, io, json, sys
from evertalk.cli import main
out = io.StringIO()
with contextlib.redirect_stdout(out):
    code = main(["memory", "status", "--home", sys.argv[1]])
print(json.dumps({"code": code, "out": out.getvalue(), "modules": sorted(sys.modules)}))
"""

NOT_LOADED = (
    # the service's side and the app
    "anthropic",
    "openai",
    "httpx",
    "textual",
    "anyio",
    "evertalk.agent",
    "evertalk.providers",
    "evertalk.compactor",
    "evertalk.client",
    "evertalk.tui",
    "evertalk.config",
    # what a rebuild of the index decodes the log with, and every scan of it (none: the
    # checkpoint covers the whole log)
    "msgspec",
    "evertalk.store.fast_lines",
    "evertalk.store.scan",
    "evertalk.store.skipped",
    "evertalk.store.pages",
    "evertalk.store.quarantine",
    "evertalk.store.jsonl",
    # the words of a chat that is behind (this one is caught up)
    "evertalk.protocol.events",
    # what argparse's help layout loads for the terminal's width (cli._Formatter finds it)
    "shutil",
    # the writers of other commands
    "evertalk.store.search_index",
    "evertalk.store.forget",
    "evertalk.store.rewrite",
    "evertalk.store.repair",
    "evertalk.store.copies",
    "evertalk.ledger",
)


def loaded_by_status(home: Path) -> tuple[str, list[str]]:
    done = subprocess.run(
        [sys.executable, "-c", RUN_STATUS, str(home)],
        capture_output=True,
        text=True,
        cwd=home,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)
    assert result["code"] == 0, done.stderr
    return result["out"], result["modules"]


def is_one_of(name: str, tops: tuple[str, ...]) -> bool:
    return any(name == top or name.startswith(top + ".") for top in tops)


def test_memory_status_loads_only_what_it_reads(tmp_path: Path) -> None:
    with Chat.open(tmp_path / "chat") as chat:
        for k in range(5):
            chat.append("user", f"short note {k}")  # free leaves: nothing to catch up
    # The owner leaves a short last run of lines for the next open to index: this first reader
    # scans them (with the fast decoders) and saves the index whole.
    _, first = loaded_by_status(tmp_path)
    assert "evertalk.store.fast_lines" in first
    out, modules = loaded_by_status(tmp_path)
    assert "messages  5," in out and "catching up" not in out
    # the listing is of a real run: it read the chat through the store
    assert {"evertalk.memory_cli", "evertalk.chat", "evertalk.store.loader"} <= set(modules)
    assert [name for name in modules if is_one_of(name, NOT_LOADED)] == []
