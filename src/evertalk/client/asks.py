"""How a permission question reads, in the app's dialog and on `-p`'s standard error: one
wording per tool that can ask, from the `ask` frame (docs/protocol.md)."""

from __future__ import annotations

import json
from typing import Any, Final

from evertalk.grants import is_mcp_tool
from evertalk.terminal_text import one_line

REQUESTS: Final[dict[str, str]] = {
    "shell": "run a shell command:",
    "read": "read {path}",
    "edit": "edit {path}",
    "write": "write {path}",  # when the service did not say whether the file exists
    "write new": "create {path}",
    "write exists": "replace {path} (a file that exists)",
    "fetch": "fetch {url}",
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
    path, url = tool_input.get("path"), tool_input.get("url")
    known = isinstance(path, str) or tool == "shell" or (tool == "fetch" and isinstance(url, str))
    wording = REQUESTS.get(key, ANYTHING) if known else ANYTHING
    words = wording.format(tool=tool, path=path, url=url)
    if is_mcp_tool(tool):  # the server's tool, by the names the user gave and the server did
        server, _, name = tool.partition("__")
        words = f"call {name} of the MCP server {server}"
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
    elif is_mcp_tool(str(frame.get("tool"))):
        line += " with " + json.dumps(_input(frame), ensure_ascii=False)
    return one_line(line)


def _input(frame: dict[str, Any]) -> dict[str, Any]:
    tool_input = frame.get("input")
    return tool_input if isinstance(tool_input, dict) else {}
