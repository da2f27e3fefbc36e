"""Who decides whether a tool that changes the machine may run (SPEC §6.6)."""

from __future__ import annotations

from typing import Any, Literal, Protocol

Decision = Literal["once", "always", "deny"]


class Asker(Protocol):
    """The terminal app asks the user; headless mode has no asker (`ask` counts as `deny`)."""

    async def ask(self, tool: str, tool_input: dict[str, Any]) -> Decision: ...
