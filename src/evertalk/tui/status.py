"""The status bar's text, and the `memory:` rows shown when a batch of merges runs.

The app samples `Agent.status()` about twice a second. A batch (SPEC §3.4) starts when the view
goes above its ceiling and merges it down to its floor. When every parent it needs is built, it
runs within one message and no sample sees it `merging`: the view's merge count moving tells it
ran. When summaries are missing, it stays `merging` across messages until it reaches the floor.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.cells import cell_len

from evertalk.protocol.events import catching_up_text
from evertalk.protocol.status import AgentStatus


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


def dollars(cost: float) -> str:
    if cost <= 0:
        return "$0.00"
    if cost < 0.01:
        return f"${cost:.4f}"
    return f"${cost:,.2f}"


def status_line(status: AgentStatus, width: int | None = None) -> str:
    """`claude-sonnet-5-5 · mem 84K/128K · summaries: 3 running, 12 queued, 1 failed · $0.42 ·
    working (Ctrl+C cancels)`, with `tools unused` after the model while it is said to call none;
    within `width` cells when given: the parts that matter least shorten or go first (the Ctrl+C
    reminder, an idle or busy compactor, the cost, the merging mark, the tools mark), and only
    then is the line cut, at its end."""
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
    cost = dollars(status.cost)
    count = status.subagents
    agents = f"{count} subagent{'s' if count != 1 else ''}" if count else ""
    working = "working" if status.busy else ""
    full = compactor_part(status)
    failed = status.compactor_failed
    # a failure stays: a warning row told of it
    brief = f"summaries: {failed} failed" if failed else ""
    if status.compactor_paused:
        brief = "summaries paused"
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


IDLE = "summaries: idle"
"""The compactor has nothing to do: every line of the chat is summarized."""


def compactor_part(status: AgentStatus) -> str:
    """`summaries: 3 running, 12 queued`, `summaries: idle`, or when the memory is far behind
    `catching up: 1,204 summaries to go, about 3 min`; and the nodes waiting to be tried again after
    a failure (the warning row said why): `summaries: 3 running, 12 queued, 1 failed`, or
    `summaries: 1 failed` alone; `summaries paused (1,204 to go)` while the compactor's model
    cannot be used or reached."""
    running, queued, failed = (
        status.compactor_running,
        status.compactor_queued,
        status.compactor_failed,
    )
    if status.compactor_paused:  # the warning row said why; no count or time means much
        to_go = status.catching_up.to_go if status.catching_up is not None else queued + failed
        return f"summaries paused ({to_go:,} to go)"
    if status.catching_up is not None:  # far behind: what a user wants is how long
        text = catching_up_text(status.catching_up)
        return text + (f", {failed} failed" if failed else "")
    counts = [f"{running} running" if running else "", f"{queued} queued" if queued else ""]
    counts.append(f"{failed} failed" if failed else "")
    shown = ", ".join(count for count in counts if count)
    return f"summaries: {shown}" if shown else IDLE


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
