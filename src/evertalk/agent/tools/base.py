"""What every tool shares: its outcome (`tool_outcome`, which MCP tools share too), its
context, its errors and its input checks.

A tool never raises for a bad call: the Toolbox turns a `ToolError` (and an OSError, a refused
memory-tool input, a store error) into an error outcome whose text is one line (SPEC §6.5).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from evertalk.agent.tools.checkpoints import TurnCheckpoint
from evertalk.agent.tools.sandbox import Sandbox
from evertalk.chat import Chat
from evertalk.memory.text import MESSAGE_LIMIT
from evertalk.tool_outcome import ToolOutcome as ToolOutcome
from evertalk.tool_outcome import failure as failure
from evertalk.tool_outcome import result as result


def output_limit(name: str) -> int:
    """How long a tool's output may be so that its echo `name: output` is one unclipped message."""
    return MESSAGE_LIMIT - len(f"{name}: ")


StartAgent = Callable[[str, str], Awaitable[str]]


@dataclass
class ToolContext:
    """Where a call runs: the chat, the working directory, the subagents' folder, and who runs
    it, with the secrets its results must not show and what its commands must not see."""

    chat: Chat  # the main chat (memory tools read it)
    workdir: Path  # where shell runs and relative paths resolve
    agents_dir: Path  # chat/agents/ (zoom(name) reads chat/agents/<Name>/*.jsonl)
    is_subagent: bool = False  # inside a subagent `agent` returns an error (depth 1)
    start_agent: StartAgent | None = None  # (name, task) -> confirmation; None = unavailable
    agent: str | None = None  # the subagent whose call this is (named when the user is asked)
    secrets: Sequence[str] = ()  # `config.secret_values()`: redacted from every result
    home: Path | None = None  # evertalk's: hidden from commands, out of the file tools' reach
    sandbox: Sandbox = field(default_factory=Sandbox)  # the session's, shared by its contexts
    turn_from: int | None = None  # the running turn's first message: `search` leaves it out
    checkpoint: TurnCheckpoint | None = None  # keeps what write and edit replace (undo)


@dataclass
class RunState:
    """What a Toolbox keeps across calls and hands to each one."""

    started_agents: set[str] = field(default_factory=set)  # casefolded names started here


class ToolError(Exception):
    """A call the tool refuses or cannot do; the message is the outcome's one line."""


class Call(Protocol):
    """A validated call, ready to run once permitted."""

    async def run(self, ctx: ToolContext, limit: int, state: RunState) -> ToolOutcome: ...


# -- input checks -------------------------------------------------------------------------------


def json_kind(value: object) -> str:
    """The JSON name of a value's type, for error messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number with a fraction" if not value.is_integer() else "a float"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


class Args:
    """A tool's input, checked key by key. Unknown keys are refused; a null counts as absent."""

    def __init__(self, tool: str, tool_input: object, known: tuple[str, ...]) -> None:
        if not isinstance(tool_input, dict):
            raise ToolError(f"{tool} takes an object of arguments, not {json_kind(tool_input)}")
        unknown = [key for key in tool_input if key not in known]
        if unknown:
            allowed = ", ".join(known)
            raise ToolError(f"{tool} has no argument {unknown[0]!r} (its arguments: {allowed})")
        self.tool = tool
        self.values: dict[str, object] = {k: v for k, v in tool_input.items() if v is not None}

    def has(self, key: str) -> bool:
        return key in self.values

    def integer(self, key: str) -> int:
        """An integer: booleans, floats (even 2.0) and strings are refused."""
        if key not in self.values:
            raise ToolError(f"{self.tool} needs `{key}`")
        value = self.values[key]
        if type(value) is not int:
            raise ToolError(f"`{key}` must be an integer, not {json_kind(value)}")
        return value

    def optional_integer(self, key: str, default: int) -> int:
        return self.integer(key) if key in self.values else default

    def string(self, key: str, *, nonempty: bool = False) -> str:
        if key not in self.values:
            raise ToolError(f"{self.tool} needs `{key}`")
        value = self.values[key]
        if not isinstance(value, str):
            raise ToolError(f"`{key}` must be a string, not {json_kind(value)}")
        if nonempty and not value.strip():
            raise ToolError(f"`{key}` must not be empty")
        return value
