"""Which tool calls may run (SPEC §6.6).

The tools that touch the machine or the network (`shell`, `read`, `write`, `edit`, `fetch`)
each have a policy in config.toml: `allow`, `ask` or `deny`. A `--allow shell,write,edit` grant
allows a tool for this run, and an answer "always" in the terminal app allows it for the rest of
the process: for `shell` the exact command string, for `fetch` the URL's host, for the others the
tool. Without a terminal (headless), `ask` counts as `deny`. A `deny` in config always wins,
over a grant too. The memory tools and `agent` are not guarded. With `tools.shell_network =
"deny"` every `fetch` is refused before anyone is asked.

A `write` or an `edit` of a file outside the working directory (links and `..` resolved) is
asked about whatever the rule, grant or earlier "always" says, naming the resolved path; "always"
then allows that path alone. A `read` outside is asked about as its rule says, naming the
resolved path too.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any, Final
from urllib.parse import urlsplit

import anyio

from evertalk.agent.permissions import AskedInput, Asker
from evertalk.config import Policy as Rule
from evertalk.config import ToolPolicies
from evertalk.grants import DENIED as DENIED
from evertalk.grants import GUARDED as GUARDED
from evertalk.grants import MCP_GRANT, covers, is_mcp_tool
from evertalk.grants import parse_grants as parse_grants

"""The start of every refusal (SPEC §6.6)."""

NO_NETWORK: Final = 'fetch is off: tools.shell_network is "deny" in config.toml'
"""Why every fetch is refused when the tools are kept off the network."""

CONFINED: Final = ("write", "edit")
"""The tools whose calls outside the working directory always ask: an allowed tool must not be
taken elsewhere by a link or a `..`."""


class Policy:
    """The permission rules of one process: config, grants, and the answers "always" so far."""

    def __init__(
        self,
        policies: ToolPolicies,
        granted: Iterable[str] = (),
        interactive: bool = False,
    ) -> None:
        self.policies = policies
        self.granted = frozenset(granted)
        unknown = sorted(g for g in self.granted if g not in GUARDED and not MCP_GRANT.fullmatch(g))
        if unknown:
            raise ValueError(f"unknown tool {unknown[0]!r} (the tools: {', '.join(GUARDED)})")
        self.interactive = interactive
        self._always: set[tuple[str, str]] = set()  # (tool, what): see `_memory_key`
        self._asking = anyio.Lock()  # one question at a time; the second may be answered already

    def rule(self, tool: str) -> Rule | None:
        """The configured rule of a guarded tool; None for a tool no policy governs. An MCP
        server's tool asks (a grant or an answer "always" lets it run)."""
        if is_mcp_tool(tool):
            return "ask"
        if tool not in GUARDED:
            return None
        rule: Rule = getattr(self.policies, tool)
        return rule

    async def permit(
        self,
        tool: str,
        tool_input: dict[str, Any],
        asker: Asker | None,
        *,
        agent: str | None = None,
    ) -> bool:
        """Whether this call may run; asks the user when the rule says so and someone can."""
        return await self.check(tool, tool_input, asker, agent=agent) is None

    async def check(
        self,
        tool: str,
        tool_input: dict[str, Any],
        asker: Asker | None,
        *,
        agent: str | None = None,
        outside: Path | None = None,
    ) -> str | None:
        """None when the call may run, else the one-line refusal the model gets. `agent` is
        the subagent whose call it is (None: the main turn), for the question to name;
        `outside`, where a file tool's call leads when that is outside the working directory."""
        rule = self.rule(tool)
        if rule is None:
            return None
        if rule == "deny":
            return f'{DENIED}: tools.{tool} is "deny" in config.toml'
        if tool == "fetch" and self.policies.shell_network == "deny":
            return NO_NETWORK  # refused before anyone is asked about it
        key = _memory_key(tool, tool_input, outside)
        if outside is not None and tool in CONFINED:
            if key in self._always:
                return None
            if not self.interactive or asker is None:
                return (
                    f"{DENIED}: {outside} is outside the working directory, and {tool} there "
                    "needs the user's yes, whatever config.toml or --allow say; there is no one "
                    "to ask here"
                )
        elif rule == "allow" or covers(self.granted, tool) or key in self._always:
            return None
        if not self.interactive or asker is None:
            return (
                f"{DENIED}: {tool} needs the user's permission, and there is no one to ask here "
                f"({_how_to_allow(tool)})"
            )
        shown = tool_input if outside is None else {**tool_input, "path": str(outside)}
        async with self._asking:
            if key in self._always:  # "always" given while this call waited
                return None
            decision = await asker.ask(tool, AskedInput(shown, agent, outside is not None))
            if decision == "always":
                self._always.add(key)
            if decision in ("once", "always"):
                return None
        return DENIED


def _how_to_allow(tool: str) -> str:
    if is_mcp_tool(tool):
        return f"it runs with --allow {tool}, or --allow {tool.partition('__')[0]}__*"
    return f'it runs with --allow {tool}, or with tools.{tool} = "allow" in config.toml'


def _memory_key(tool: str, tool_input: dict[str, Any], outside: Path | None) -> tuple[str, str]:
    """What an answer "always" covers: for `shell` the exact command; for `fetch` the URL's
    host; for `write` and `edit` outside the working directory the resolved path; otherwise the
    tool."""
    if outside is not None and tool in CONFINED:
        return (tool, str(outside))
    if tool == "shell":
        command = tool_input.get("command")
        return (tool, f"$ {command}")
    if tool == "fetch":
        url = tool_input.get("url")
        host = urlsplit(url.strip()).hostname if isinstance(url, str) else None
        return (tool, f"host {host}")
    return (tool, "")
