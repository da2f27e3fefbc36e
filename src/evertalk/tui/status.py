"""The status bar's text, and the `memory:` rows shown when a batch of merges runs.

The app samples `Agent.status()` about twice a second. A batch (SPEC §3.4) starts when the view
goes above its ceiling and merges it down to its floor. When every parent it needs is built, it
runs within one message and no sample sees it `merging`: the view's merge count moving tells it
ran. When summaries are missing, it stays `merging` across messages until it reaches the floor.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.cells import cell_len

from evertalk.budget import Day
from evertalk.budget import dollars as dollars  # the app takes it from here with the rest
from evertalk.protocol.status import AgentStatus
from evertalk.protocol.summaries_text import IDLE, PAUSED, compactor_part, failed_count


def kilobytes(size: int) -> str:
    """`470B`, `9.9K`, `84K`: one decimal below 10,000 bytes."""
    if size < 1000:
        return f"{size}B"
    if size < 10_000:
        return f"{size / 1000:.1f}K"
    return f"{round(size / 1000)}K"


def exact_kb(size: int) -> str:
    """`131.2 KB` for a row, where the drop of a batch must read clearly."""
    return f"{size / 1000:.1f} KB"


def round_kb(size: int) -> str:
    """`64 KB` for the budget's bounds, which are round numbers."""
    return f"{size / 1000:g} KB"


def status_line(status: AgentStatus, width: int | None = None) -> str:
    """`claude-sonnet-5-5 · mem 84K/128K · summaries: 3 running, 12 queued, 1 failed · $0.42 ·
    working (Ctrl+C cancels)` (the cost: today's, as the ledger counts it), with `tools unused`
    after the model while it is said to call none; within `width` cells when given: the parts
    that matter least shorten or go first (the Ctrl+C reminder, an idle or busy compactor, the
    cost, the merging mark, the tools mark), and only then is the line cut, at its end."""
    lines = [" · ".join(part for part in parts if part) for parts in status_versions(status)]
    if width is None:
        return lines[0]
    for line in lines:
        if cell_len(line) <= width:
            return line
    line = lines[-1]
    while line and cell_len(line) > width - 1:
        line = line[:-1]
    return line.rstrip(" ·") + "…" if width > 0 else ""


def status_versions(status: AgentStatus) -> list[list[str]]:
    """The status bar's parts, longest first; an empty part is left out."""
    model = status.model or "(no model)"
    memory = f"mem {kilobytes(status.view_bytes)}/{kilobytes(status.view_ceiling)}"
    merging = memory + (", merging" if status.merging else "")
    cost = Day(status.cost, status.budget).shown()  # `$1.23/$5.00` with a daily budget
    count = status.subagents
    agents = f"{count} subagent{'s' if count != 1 else ''}" if count else ""
    working = "working" if status.busy else ""
    full = compactor_part(status)
    # a failure stays: a warning row told of it
    failed = failed_count(status.compactor_failed)
    brief = PAUSED if status.compactor_paused else failed and f"summaries: {failed}"
    # stays while it holds: replies that may be made up matter more than the cost
    unused = "tools unused" if status.tools_unused else ""
    return [
        [model, unused, merging, full, cost, agents, working and "working (Ctrl+C cancels)"],
        [model, unused, merging, full, cost, agents, working],
        [model, unused, merging, "" if full == IDLE else full, cost, agents, working],
        [model, unused, merging, brief, cost, agents, working],
        [model, unused, merging, brief, agents, working],
        [model, unused, memory, brief, agents, working],
        [model, memory, working],
    ]


@dataclass
class MemoryWatch:
    """Follows the batches between samples of the status: one row when a batch is seen waiting
    for summaries, one when a batch has ended."""

    merges: int | None = None  # the view's merge count at the last sample; None before the first
    running: bool = False  # the last sample saw a batch waiting
    peak: int = 0  # the largest view size from the last sample before the batch on

    def sample(self, status: AgentStatus) -> str | None:
        """The `memory:` row to show for this sample, or None."""
        merged = self.merges is not None and status.view_merges > self.merges
        started = status.merging and not self.running
        ended = not status.merging and (self.running or merged)
        peak = max(self.peak, status.view_bytes)
        self.merges, self.running = status.view_merges, status.merging
        self.peak = peak if status.merging else status.view_bytes
        if started:
            return (
                f"memory: the view passed {round_kb(status.view_ceiling)}, merging it down to "
                f"{round_kb(status.view_floor)} as summaries come "
                f"(now {exact_kb(status.view_bytes)})"
            )
        if ended:
            return f"memory: merged, view now {exact_kb(status.view_bytes)} (was {exact_kb(peak)})"
        return None
