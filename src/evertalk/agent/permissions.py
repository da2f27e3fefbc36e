"""Who decides whether a tool that changes the machine may run (SPEC §6.6)."""

from __future__ import annotations

from typing import Any, Protocol

from evertalk.grants import Decision as Decision


class AskedInput(dict[str, Any]):
    """The input of a call the user is asked about: the tool's input as before (a plain dict to
    an asker that looks no further), plus `agent`, the subagent whose call it is, or None for
    the main turn. It rides on the input so that askers written before it keep working."""

    def __init__(
        self, tool_input: dict[str, Any], agent: str | None = None, outside: bool = False
    ) -> None:
        super().__init__(tool_input)
        self.agent = agent
        self.outside = outside  # a file tool's call outside the working directory


class Asker(Protocol):
    """The terminal app asks the user; headless mode has no asker (`ask` counts as `deny`).
    `tool_input` is an `AskedInput`: `getattr(tool_input, "agent", None)` names the subagent."""

    async def ask(self, tool: str, tool_input: dict[str, Any]) -> Decision: ...
