"""How a permission question reads, in the app's dialog and on `-p`'s standard error: one
wording per tool that can ask, from the `ask` frame (docs/protocol.md)."""

from __future__ import annotations

from typing import Any, Final

from evertalk.terminal_text import one_line

REQUESTS: Final[dict[str, str]] = {
    "shell": "run a shell command:",
    "read": "read {path}",
    "edit": "edit {path}",
    "write": "write {path}",  # when the service did not say whether the file exists
    "write new": "create {path}",
    "write exists": "replace {path} (a file that exists)",
}
"""What Ever wants, by tool (and, for `write`, by whether the file exists)."""
ANYTHING: Final = "use the {tool} tool"
"""A tool the table lacks: a newer service's."""


def request(frame: dict[str, Any]) -> str:
    """`Ever wants to replace src/app.py (a file that exists)`: the question's first line."""
    tool, tool_input = str(frame.get("tool")), _input(frame)
    key = tool
    if tool == "write" and isinstance(frame.get("exists"), bool):
        key = "write exists" if frame["exists"] else "write new"
    path = tool_input.get("path")
    wording = REQUESTS.get(key, ANYTHING) if isinstance(path, str) or tool == "shell" else ANYTHING
    words = wording.format(tool=tool, path=path)
    if frame.get("outside"):
        words += ", outside the working directory"
    agent = frame.get("agent")
    who = f"Ever's subagent {agent}" if isinstance(agent, str) and agent else "Ever"
    return f"{who} wants to {words}"


def request_line(frame: dict[str, Any]) -> str:
    """The question on one line, the command included: `Ever wants to run a shell command: ls`."""
    command = _input(frame).get("command")
    line = request(frame)
    if frame.get("tool") == "shell" and isinstance(command, str):
        line += " " + command
    return one_line(line)


def _input(frame: dict[str, Any]) -> dict[str, Any]:
    tool_input = frame.get("input")
    return tool_input if isinstance(tool_input, dict) else {}
