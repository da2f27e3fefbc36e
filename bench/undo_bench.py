"""Undoing a turn that changed 20 files: what keeping the checkpoint adds to each `write`, and
the time of the undo's preview (each file read, its diff made) and of the restore itself, as
the service does them for `/undo` and `evertalk undo` (the socket's round trips aside).

Each file is a source file of 300 lines (about 12 KB); the turn rewrites every tenth line.

`python -m bench.undo_bench` runs it alone.
"""

from __future__ import annotations

import statistics
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path

import anyio

from evertalk.agent.policy import Policy
from evertalk.agent.tools import Toolbox, ToolContext
from evertalk.agent.tools.checkpoints import Checkpoints
from evertalk.agent.undo import apply, plan
from evertalk.chat import Chat
from evertalk.config import ToolPolicies

FILES = 20
LINES = 300


@dataclass
class UndoFigures:
    write_ms: float  # the median write without a checkpoint
    kept_ms: float  # … and with one
    preview_ms: float
    restore_ms: float
    diff_lines: int

    def line(self) -> str:
        return (
            f"undo of a turn that changed {FILES} files ({LINES} lines each): preview "
            f"{self.preview_ms:.1f} ms ({self.diff_lines:,} diff lines), restore "
            f"{self.restore_ms:.1f} ms; a write {self.write_ms:.2f} ms, "
            f"{self.kept_ms:.2f} ms with its checkpoint"
        )


def _source(n: int, changed: bool) -> str:
    return "".join(
        f"line {i} of file {n}{' (changed)' if changed and i % 10 == 0 else ''}\n"
        for i in range(LINES)
    )


async def _writes(ctx: ToolContext, suffix: str, changed: bool) -> list[float]:
    toolbox = Toolbox(Policy(ToolPolicies(), granted=["write"]), None)
    times = []
    for n in range(FILES):
        args = {"path": f"src/f{n}{suffix}.py", "content": _source(n, changed)}
        started = time.perf_counter()
        outcome = await toolbox.run("write", args, ctx)
        times.append((time.perf_counter() - started) * 1e3)
        assert not outcome.is_error, outcome.text
    return times


async def _measure(root: Path) -> UndoFigures:
    work = root / "work"
    (work / "src").mkdir(parents=True)
    with Chat.open(root / "chat") as chat:
        ctx = ToolContext(chat=chat, workdir=work, agents_dir=root / "chat" / "agents")
        for n in range(FILES):
            (work / "src" / f"f{n}.py").write_text(_source(n, False))
        bare = await _writes(ctx, "-bare", False)
        store = Checkpoints(root / "checkpoints")
        kept = await _writes(replace(ctx, checkpoint=store.turn(1)), "", True)
    started = time.perf_counter()
    planned = plan(store)
    preview = planned.lines()
    preview_ms = (time.perf_counter() - started) * 1e3
    started = time.perf_counter()
    done = apply(store, planned)
    restore_ms = (time.perf_counter() - started) * 1e3
    assert len(done.restored) == FILES and not done.refused
    return UndoFigures(
        statistics.median(bare), statistics.median(kept), preview_ms, restore_ms, len(preview)
    )


def run() -> UndoFigures:
    with tempfile.TemporaryDirectory() as folder:
        return anyio.run(_measure, Path(folder))


if __name__ == "__main__":
    print(run().line())
