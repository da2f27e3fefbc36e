"""How a permission question reads, in the app's dialog and on `-p`'s standard error: one
wording per tool that can ask, from the `ask` frame (docs/protocol.md)."""

from __future__ import annotations

import json
from typing import Final

from evertalk.grants import is_mcp_tool
from evertalk.protocol.replies import Ask
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


def request(ask: Ask) -> str:
    """`Ever wants to replace src/app.py (a file that exists)`: the question's first line."""
    tool, tool_input = ask.tool, ask.input
    key = tool
    if tool == "write" and isinstance(ask.exists, bool):
        key = "write exists" if ask.exists else "write new"
    path, url = tool_input.get("path"), tool_input.get("url")
    known = isinstance(path, str) or tool == "shell" or (tool == "fetch" and isinstance(url, str))
    wording = REQUESTS.get(key, ANYTHING) if known else ANYTHING
    words = wording.format(tool=tool, path=path, url=url)
    if is_mcp_tool(tool):  # the server's tool, by the names the user gave and the server did
        server, _, name = tool.partition("__")
        words = f"call {name} of the MCP server {server}"
    if ask.outside:
        words += ", outside the working directory"
    who = f"Ever's subagent {ask.agent}" if ask.agent else "Ever"
    return f"{who} wants to {words}"


def request_line(ask: Ask) -> str:
    """The question on one line, the command included: `Ever wants to run a shell command: ls`."""
    command = ask.input.get("command")
    line = request(ask)
    if ask.tool == "shell" and isinstance(command, str):
        line += " " + command
    elif is_mcp_tool(ask.tool):
        line += " with " + json.dumps(ask.input, ensure_ascii=False)
    return one_line(line)
