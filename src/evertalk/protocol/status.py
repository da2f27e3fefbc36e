"""What the service says of its agent when a client asks (`status`): the turn model, the view's
size and bounds, the compactor's work, the session's cost. The status bar shows it."""

from __future__ import annotations

import msgspec

from evertalk.protocol.events import Behind


class AgentStatus(msgspec.Struct, frozen=True, kw_only=True):
    model: str
    view_bytes: int  # the view's size as the budget counts it (SPEC §3.1)
    view_ceiling: int  # a batch of merges starts once the view is above this (SPEC §3.4)
    view_floor: int  # … and merges it down to this
    merging: bool  # a batch waits for summaries to go on (the view's `shrinking`)
    view_merges: int  # over the whole chat: it also moves for a batch done within one message
    compactor_running: int
    compactor_queued: int
    cost: float  # USD the ledger counts for today: turns, subagents and compactions
    turn_cost: float  # USD of turns and subagents since the service started
    busy: bool
    subagents: int  # running now
    compactor_failed: int = 0  # nodes waiting to be tried again after a failure
    compactor_error: str | None = None  # the latest one, as `12+1: why`
    # the compactor's model cannot be used or reached: no summary comes until it can (its
    # error is `compactor_error`)
    compactor_paused: bool = False
    catching_up: Behind | None = None  # the memory is far behind: how far, how long
    tools_unused: bool = False  # said to call no tools, and none called since (`tool_watch.py`)
    # why the chat takes no changes until it is reopened (a write failed: a full disk); the
    # service reopens it at the next message once the disk takes writes again
    chat_error: str | None = None
    # the MCP servers that are not running, one line each (`NAME: cannot start: …`): their
    # tools' calls fail meanwhile, and the server is tried again (`mcp_client/link.py`)
    mcp_problems: tuple[str, ...] = ()
    budget: float | None = None  # `[budget] daily`, dollars; shown beside `cost` (`budget.py`)
