"""The status bar's text, and the `memory:` rows shown when a batch of merges runs.

The app samples `Agent.status()` about twice a second. A batch (SPEC §3) takes the view from
above its 128,000-byte ceiling down to at most 64,000 bytes at once, so a sharp drop of the view
size between two samples is a batch that ran: it gets a one-line row in the log.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from evertalk.agent.session import AgentStatus

CEILING: Final = 128_000  # the view's budget ceiling (memory.Budget)
DROP_SHARE: Final = 0.2  # a drop of at least this share of the view...
DROP_BYTES: Final = 4_000  # ...and at least this many bytes is a batch


def kilobytes(size: int) -> str:
    """`470B`, `9.9K`, `84K`: one decimal below 10,000 bytes."""
    if size < 1000:
        return f"{size}B"
    if size < 10_000:
        return f"{size / 1000:.1f}K"
    return f"{round(size / 1000)}K"


def dollars(cost: float) -> str:
    if cost <= 0:
        return "$0.00"
    if cost < 0.01:
        return f"${cost:.4f}"
    return f"${cost:,.2f}"


def status_line(status: AgentStatus, *, ceiling: int = CEILING) -> str:
    """`claude-sonnet-5-5 · mem 84K/128K · summarizing 3, queued 12 · $0.42 · working`."""
    parts = [
        status.model or "(no model)",
        f"mem {kilobytes(status.view_bytes)}/{kilobytes(ceiling)}",
    ]
    if status.compactor_running or status.compactor_queued:
        parts.append(f"summarizing {status.compactor_running}, queued {status.compactor_queued}")
    else:
        parts.append("memory idle")
    parts.append(dollars(status.cost))
    if status.subagents:
        parts.append(f"{status.subagents} subagent{'s' if status.subagents != 1 else ''}")
    if status.busy:
        parts.append("working (Ctrl+C cancels)")
    return " · ".join(parts)


@dataclass
class MemoryWatch:
    """Remembers the view size between samples; says when a batch has merged it down."""

    last: int | None = None

    def sample(self, view_bytes: int) -> str | None:
        """The `memory:` row to show for this sample, or None."""
        before, self.last = self.last, view_bytes
        if before is None:
            return None
        drop = before - view_bytes
        if drop >= DROP_BYTES and drop >= before * DROP_SHARE:
            now, was = view_bytes / 1000, before / 1000
            return f"memory: merged, view now {now:.1f} KB (was {was:.1f} KB)"
        return None
