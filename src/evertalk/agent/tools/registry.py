"""The Toolbox: one entry point that validates a call, checks its permission and runs it.

`Toolbox.run` never raises for a bad input, a refusal, a timeout or an OS error: each of those is
an error outcome whose text is one line. Cancellation (the user stopped the turn) still propagates,
after the shell tool has killed its command. Every outcome leaves with the known secrets redacted
(`ToolContext.secrets`): a `read` of config.toml or a `cat .env` must not put a key in the log.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from evertalk.agent.permissions import Asker
from evertalk.agent.policy import Policy
from evertalk.agent.tools.agent import DEPTH_ERROR, parse_agent
from evertalk.agent.tools.base import (
    Call,
    RunState,
    ToolContext,
    ToolError,
    ToolOutcome,
    failure,
    output_limit,
)
from evertalk.agent.tools.fetch import parse_fetch
from evertalk.agent.tools.files import (
    EditCall,
    parse_edit,
    parse_read,
    parse_write,
    permitted,
    reach,
)
from evertalk.agent.tools.memory import parse_date, parse_search, parse_zoom
from evertalk.agent.tools.shell import parse_shell
from evertalk.chat import ToolInputError
from evertalk.memory.text import clip_output
from evertalk.prompts import TOOLS
from evertalk.providers.base import Image, Text, Tool
from evertalk.store.errors import StoreError, describe

if TYPE_CHECKING:
    from evertalk.mcp_client.tools import McpTools

PARSERS: Final[dict[str, Callable[[object], Call]]] = {
    "zoom": parse_zoom,
    "date": parse_date,
    "search": parse_search,  # offered only with `[memory] search = true` (Runtime.tools)
    "shell": parse_shell,
    "read": parse_read,
    "write": parse_write,
    "edit": parse_edit,
    "fetch": parse_fetch,
    "agent": parse_agent,
}
"""Every tool of `prompts.TOOLS` and `search_tool.SEARCH`, by name: its input check, which
returns a call to run."""

MEMORY_TOOLS: Final = frozenset({"zoom", "date", "search"})
"""Their output is not clipped here: `zoom(id, 1)` returns its message whole (SPEC §6.5), and
a search's is bounded by its hits."""


class Toolbox:
    """The tools of a turn (or of a subagent), with the process's permission policy, and the
    tools of the configured MCP servers (`mcp`), which always ask unless granted."""

    definitions: Final[list[Tool]] = TOOLS

    def __init__(self, policy: Policy, asker: Asker | None, mcp: McpTools | None = None) -> None:
        self.policy = policy
        self.asker = asker
        self.mcp = mcp
        self.state = RunState()

    async def run(self, name: str, tool_input: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
        """Validate, check permission, run. Unknown tool, bad input, refusal, timeout or OS
        error: an error outcome with a one-line text. No known secret is left in the text."""
        outcome = await self._run(name, tool_input, ctx)
        outcome = outcome.redacted(ctx.secrets)
        if name in MEMORY_TOOLS:
            return outcome
        return clip(outcome, output_limit(name))  # `[redacted]` may be longer than its secret

    async def _run(self, name: str, tool_input: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
        parse = PARSERS.get(name)
        if parse is None and self.mcp is not None and self.mcp.offers(name):
            return await self._run_mcp(name, tool_input, ctx)
        if parse is None:
            return failure(f"there is no tool {name!r} (the tools: {', '.join(PARSERS)})")
        if name == "agent" and ctx.is_subagent:
            return failure(DEPTH_ERROR)
        try:
            call = parse(tool_input)
            outside = reach(call, ctx)
            if isinstance(call, EditCall) and await self._readable(call.path, outside, ctx):
                call.check(ctx)  # no one is asked about an edit that cannot apply
            refusal = await self.policy.check(
                name, tool_input, self.asker, agent=ctx.agent, outside=outside
            )
            if refusal is not None:
                return failure(refusal)
            limit = output_limit(name)
            outcome = await permitted(call, outside).run(ctx, limit, self.state)
        except (ToolError, ToolInputError) as error:
            return failure(str(error))
        except OSError as error:
            return failure(describe(error))
        except StoreError as error:
            return failure(f"the chat cannot be read: {error}")
        return outcome

    async def _readable(self, path: str, outside: Path | None, ctx: ToolContext) -> bool:
        """Whether a read of the file would run unasked: only then may an edit's check read it
        before the user is asked (else its error would tell the model what the file holds)."""
        if outside is not None:
            return False
        return await self.policy.check("read", {"path": path}, None, agent=ctx.agent) is None

    async def _run_mcp(
        self, name: str, tool_input: dict[str, Any], ctx: ToolContext
    ) -> ToolOutcome:
        """A tool of an MCP server: asked about (the question names the server), then called."""
        assert self.mcp is not None
        if not isinstance(tool_input, dict):
            return failure(f"{name} takes an object of arguments")
        refusal = await self.policy.check(name, tool_input, self.asker, agent=ctx.agent)
        if refusal is not None:
            return failure(refusal)
        return await self.mcp.call(name, tool_input)


def clip(outcome: ToolOutcome, limit: int) -> ToolOutcome:
    """The outcome with its text clipped to `limit` characters (SPEC §1.5); images are kept."""
    if len(outcome.text) <= limit:
        return outcome
    content: list[Text | Image] = [Text(clip_output(outcome.text, limit)), *outcome.images]
    return replace(outcome, content=content)
