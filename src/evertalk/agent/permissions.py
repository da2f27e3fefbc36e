"""Who decides whether a tool that changes the machine may run (SPEC §6.6)."""

from __future__ import annotations

from contextvars import ContextVar
from pathlib import Path
from typing import Any, Protocol

from evertalk.grants import Decision as Decision

CALL_WORKDIR: ContextVar[Path | None] = ContextVar("CALL_WORKDIR", default=None)
"""The working directory of the tool call that runs in this task: the turn loop sets it around
each call, so that a question can show what a `write` would do to the file a relative path
names there (a subagent's calls run in the folder of the turn that started it)."""


class AskedInput(dict[str, Any]):
    """The input of a call the user is asked about: the tool's input as before (a plain dict to
    an asker that looks no further), plus `agent`, the subagent whose call it is, or None for
    the main turn, and `workdir`, where the call runs (None when unknown). They ride on the
    input so that askers written before them keep working."""

    def __init__(
        self, tool_input: dict[str, Any], agent: str | None = None, outside: bool = False
    ) -> None:
        super().__init__(tool_input)
        self.agent = agent
        self.outside = outside  # a file tool's call outside the working directory
        self.workdir = CALL_WORKDIR.get()


class Asker(Protocol):
    """The terminal app asks the user; headless mode has no asker (`ask` counts as `deny`).
    `tool_input` is an `AskedInput`: `getattr(tool_input, "agent", None)` names the subagent."""

    async def ask(self, tool: str, tool_input: dict[str, Any]) -> Decision: ...
