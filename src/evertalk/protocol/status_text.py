"""The service's `status` frame read once, for every client: `read_status` turns it into a
ServiceStatus (the service's own fields, the agent's as the status bar takes them, and whatever
a newer service adds), and `status_lines` says it in words, one line a fact, for a person or a
model (MCP `memory_status`). No field reaches a reader under its raw name unless this side does
not know it."""

from __future__ import annotations

import json
from dataclasses import dataclass, field, fields
from typing import Any

from evertalk.protocol.status import AgentStatus, status_of
from evertalk.protocol.summaries_text import PAUSED_WHY, compactor_part, summary_counts

SERVICE_FIELDS = ("pid", "version", "clients", "messages")
ENVELOPE = ("type", "rid")


@dataclass(frozen=True)
class ServiceStatus:
    pid: int
    version: str
    clients: int  # connected now, the one asking included
    messages: int | None  # in the chat; None from a service that does not say
    agent: AgentStatus
    unknown: dict[str, Any] = field(default_factory=dict)  # a newer service's fields


def read_status(frame: dict[str, Any]) -> ServiceStatus:
    """The status in a `status` frame."""
    known = {item.name for item in fields(AgentStatus)} | set(SERVICE_FIELDS) | set(ENVELOPE)
    messages = frame.get("messages")
    return ServiceStatus(
        pid=int(frame.get("pid") or 0),
        version=str(frame.get("version") or "?"),
        clients=int(frame.get("clients") or 0),
        messages=messages if isinstance(messages, int) else None,
        agent=status_of(frame),
        unknown={name: value for name, value in frame.items() if name not in known},
    )


def status_lines(status: ServiceStatus) -> list[str]:
    """Every fact of the status in words."""
    agent = status.agent
    lines = _chat_lines(status.messages, agent)
    lines.append("Ever: working on a turn" if agent.busy else "Ever: not in a turn")
    if agent.subagents:
        lines.append(f"subagents at work: {agent.subagents}")
    lines += _summary_lines(agent)
    if agent.model:
        lines.append(f"turn model: {agent.model}")
    if agent.tools_unused:
        lines.append("tools unused: the turn model was offered tools and has called none")
    lines.append(
        f"spent today: ${agent.cost:.4f} (turns and subagents since the service started: "
        f"${agent.turn_cost:.4f})"
    )
    lines += [f"MCP server {problem}" for problem in agent.mcp_problems]
    others = f"{status.clients} client{'' if status.clients == 1 else 's'} connected"
    lines.append(f"service: pid {status.pid}, evertalk {status.version}, {others}")
    lines += [f"{name}: {json.dumps(value)}" for name, value in status.unknown.items()]
    return lines


def _chat_lines(messages: int | None, agent: AgentStatus) -> list[str]:
    lines: list[str] = []
    if messages is not None:
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
