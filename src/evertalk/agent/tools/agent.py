"""The `agent` tool: its input checks and the depth rule (SPEC §6.7).

Starting and running the subagent is the caller's: `ToolContext.start_agent(name, task)` starts it
in the background and gives back a confirmation without waiting for it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from evertalk.agent.tools.base import Args, RunState, ToolContext, ToolError, ToolOutcome, result

DEPTH_ERROR = "subagents cannot start subagents: do the work yourself"
NAME_RULE = "a letter followed by at most 31 letters, digits, `-` or `_`"
_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_-]{0,31}")


def valid_name(name: str) -> bool:
    """A subagent name: an ASCII letter, then up to 31 ASCII letters, digits, `-` or `_`."""
    return _NAME.fullmatch(name) is not None


def name_taken(agents_dir: Path, name: str) -> bool:
    """Whether a subagent of this chat already has the name. Names differing only in case count
    as the same, so that `[Scout]` and `[scout]` never both report and a case-insensitive file
    system never merges two logs."""
    wanted = name.casefold()
    try:
        return any(entry.name.casefold() == wanted for entry in agents_dir.iterdir())
    except FileNotFoundError:
        return False


def parse_agent(tool_input: object) -> AgentCall:
    args = Args("agent", tool_input, ("name", "task"))
    name = args.string("name")
    if not valid_name(name):
        shown = name if len(name) <= 40 else name[:40] + "…"
        raise ToolError(f"the name {shown!r} is not allowed: a name is {NAME_RULE}")
    return AgentCall(name, args.string("task", nonempty=True))


@dataclass(frozen=True)
class AgentCall:
    name: str
    task: str

    async def run(self, ctx: ToolContext, limit: int, state: RunState) -> ToolOutcome:
        if ctx.is_subagent:
            raise ToolError(DEPTH_ERROR)
        if ctx.start_agent is None:
            raise ToolError("subagents are not available here")
        key = self.name.casefold()
        if key in state.started_agents or name_taken(ctx.agents_dir, self.name):
            raise ToolError(f"the name {self.name!r} is already used in this chat: choose another")
        state.started_agents.add(key)  # held before the await: two calls cannot both take it
        try:
            confirmation = await ctx.start_agent(self.name, self.task)
        except BaseException:
            state.started_agents.discard(key)
            raise
        return result(confirmation or f"{self.name} started")
