"""Which tool calls may run (SPEC §6.6).

The tools that touch the machine (`shell`, `read`, `write`, `edit`) each have a policy in
config.toml: `allow`, `ask` or `deny`. A `--allow shell,write,edit` grant allows a tool for this
run, and an answer "always" in the terminal app allows it for the rest of the process: for `shell`
the exact command string, for the others the tool. Without a terminal (headless), `ask` counts as
`deny`. A `deny` in config always wins, over a grant too. The memory tools and `agent` are not
guarded.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Final

import anyio

from evertalk.agent.permissions import AskedInput, Asker
from evertalk.config import Policy as Rule
from evertalk.config import ToolPolicies

GUARDED: Final = ("shell", "read", "write", "edit")
"""The tools a policy governs, in the order of `--allow` help texts."""

DENIED: Final = "the user did not allow this call"
"""The start of every refusal (SPEC §6.6)."""


def parse_grants(text: str) -> list[str]:
    """The tools of a `--allow` value such as `shell,write,edit` (spaces allowed); a ValueError
    names an unknown one."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    for name in names:
        if name not in GUARDED:
            raise ValueError(f"--allow: unknown tool {name!r} (the tools: {', '.join(GUARDED)})")
    return names


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
        unknown = sorted(self.granted.difference(GUARDED))
        if unknown:
            raise ValueError(f"unknown tool {unknown[0]!r} (the tools: {', '.join(GUARDED)})")
        self.interactive = interactive
        self._always_tools: set[str] = set()
        self._always_commands: set[str] = set()
        self._asking = anyio.Lock()  # one question at a time; the second may be answered already

    def rule(self, tool: str) -> Rule | None:
        """The configured rule of a guarded tool; None for a tool no policy governs."""
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
    ) -> str | None:
        """None when the call may run, else the one-line refusal the model gets. `agent` is
        the subagent whose call it is (None: the main turn), for the question to name."""
        rule = self.rule(tool)
        if rule is None or rule == "allow":
            return None
        if rule == "deny":
            return f'{DENIED}: tools.{tool} is "deny" in config.toml'
        if tool in self.granted or self._remembered(tool, tool_input):
            return None
        if not self.interactive or asker is None:
            return (
                f"{DENIED}: {tool} needs the user's permission, and there is no one to ask here "
                f'(it runs with --allow {tool}, or with tools.{tool} = "allow" in config.toml)'
            )
        async with self._asking:
            if self._remembered(tool, tool_input):  # "always" given while this call waited
                return None
            decision = await asker.ask(tool, AskedInput(tool_input, agent))
            if decision == "once":
                return None
            if decision == "always":
                self._remember(tool, tool_input)
                return None
        return DENIED

    def _remembered(self, tool: str, tool_input: dict[str, Any]) -> bool:
        if tool == "shell":
            command = tool_input.get("command")
            return isinstance(command, str) and command in self._always_commands
        return tool in self._always_tools

    def _remember(self, tool: str, tool_input: dict[str, Any]) -> None:
        if tool == "shell":
            command = tool_input.get("command")
            if isinstance(command, str):
                self._always_commands.add(command)
        else:
            self._always_tools.add(tool)
