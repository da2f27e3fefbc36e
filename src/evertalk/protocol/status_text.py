"""The service's `status` reply in words, one line a fact, for a person or a model (MCP
`memory_status`, `evertalk service status`): `status_lines`. No field reaches a reader under
its raw name."""

from __future__ import annotations

from evertalk.protocol.replies import Status
from evertalk.protocol.status import AgentStatus
from evertalk.protocol.summaries_text import PAUSED_WHY, compactor_part, summary_counts


def status_lines(status: Status) -> list[str]:
    """Every fact of the status in words (its agent's part is the status itself: `Status` is
    an `AgentStatus` with the service's fields)."""
    lines = _chat_lines(status.messages, status)
    lines.append("Ever: working on a turn" if status.busy else "Ever: not in a turn")
    if status.subagents:
        lines.append(f"subagents at work: {status.subagents}")
    lines += _summary_lines(status)
    if status.model:
        lines.append(f"turn model: {status.model}")
    if status.tools_unused:
        lines.append("tools unused: the turn model was offered tools and has called none")
    lines.append(
        f"spent today: ${status.cost:.4f} (turns and subagents since the service started: "
        f"${status.turn_cost:.4f})"
    )
    lines += [f"MCP server {problem}" for problem in status.mcp_problems]
    others = f"{status.clients} client{'' if status.clients == 1 else 's'} connected"
    lines.append(f"service: pid {status.pid}, evertalk {status.version}, {others}")
    return lines


def _chat_lines(messages: int, agent: AgentStatus) -> list[str]:
    lines: list[str] = []
    ids = f" (ids 0 to {messages - 1:,})" if messages else " (none yet)"
    lines.append(f"messages: {messages:,}{ids}")
    if agent.chat_error:
        lines.append(
            f"the chat takes no changes until it is reopened: {_line(agent.chat_error)}; the "
            "next message reopens it once the disk takes writes again"
        )
    lines.append(
        f"view: {agent.view_bytes:,} bytes of summaries; past {agent.view_ceiling:,}, merges of "
        f"older lines bring it down to {agent.view_floor:,}"
    )
    if agent.merging:
        lines.append("merging: a batch of merges waits for summaries")
    lines.append(f"merges so far: {agent.view_merges:,}")
    return lines


def _summary_lines(agent: AgentStatus) -> list[str]:
    """The compactor's part as the status bar shows it, then what the bar has no room for: why
    it is paused, the counts behind a catching-up figure, the latest failure."""
    part = compactor_part(agent)
    if agent.compactor_paused:
        lines = [f"{part}: {PAUSED_WHY}"]
    else:
        lines = [part]
        counts = summary_counts(agent)
        if counts != part:
            lines.append(counts)
    if agent.compactor_error:
        lines.append(f"latest summary failure: {_line(agent.compactor_error)}")
    return lines


def _line(value: object) -> str:
    return " ".join(str(value).split())
