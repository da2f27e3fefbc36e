"""The compactor's state in words, as one part of a line: `summaries: 3 running, 12 queued, 1
failed`, `summaries: idle`, `catching up: 1,204 summaries to go, about 3 min`, `summaries paused
(1,204 to go)`. The app's status bar shows it as its compactor's part; the status in lines (MCP
`memory_status`, `service status`) starts its summaries with it, then adds what a bar has no
room for. The same state reads the same wherever it is shown."""

from __future__ import annotations

from typing import Final

from evertalk.protocol.events import catching_up_text
from evertalk.protocol.status import AgentStatus

IDLE: Final = "summaries: idle"
"""The compactor has nothing to do: every line of the chat is summarized."""

PAUSED: Final = "summaries paused"
"""Its model cannot be used or reached: no summary comes until it can (SPEC §4.5)."""

PAUSED_WHY: Final = "the summary model cannot be used or reached"


def compactor_part(status: AgentStatus) -> str:
    """The state in one part: paused, with what is left (no count of failures nor time means
    much until the model answers); far behind, how long catching up takes (what a user wants
    then), with the nodes waiting to be tried again after a failure; else the counts, or idle."""
    if status.compactor_paused:
        return f"{PAUSED} ({paused_to_go(status):,} to go)"
    if status.catching_up is not None:
        return catching_up_text(status.catching_up) + failed_suffix(status.compactor_failed)
    return summary_counts(status)


def summary_counts(status: AgentStatus) -> str:
    """`summaries: 3 running, 12 queued, 1 failed`, the counts that are not zero; `summaries:
    idle` when all are."""
    counts = [
        f"{status.compactor_running} running" if status.compactor_running else "",
        f"{status.compactor_queued} queued" if status.compactor_queued else "",
        failed_count(status.compactor_failed),
    ]
    shown = ", ".join(count for count in counts if count)
    return f"summaries: {shown}" if shown else IDLE


def paused_to_go(status: AgentStatus) -> int:
    """What a paused compactor leaves to do: the catching-up figure when the chat is far
    behind, else its queue (the failed nodes included)."""
    if status.catching_up is not None:
        return status.catching_up.to_go
    return status.compactor_queued + status.compactor_failed


def failed_count(failed: int) -> str:
    """`1 failed`: nodes waiting to be tried again after a failure; empty for none."""
    return f"{failed} failed" if failed else ""


def failed_suffix(failed: int) -> str:
    return f", {failed_count(failed)}" if failed else ""
