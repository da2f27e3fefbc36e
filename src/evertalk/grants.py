"""The tools a user may grant for one run (`--allow shell,write`): standard library only.

Besides the built-in tools, an MCP server's tool is granted by its name as the model calls it
(`--allow time__get_current_time`), and every tool of a server by `NAME__*` (`--allow time__*`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Final, Literal

GUARDED: Final = ("shell", "read", "write", "edit", "fetch")
"""The tools that may change (or read outside) the machine's files, or reach the network: they
run by policy."""

Decision = Literal["once", "always", "deny"]
"""A user's answer to a permission request."""

DENIED: Final = "the user did not allow this call"
"""How a call the user (or the policy) refused starts its result."""


MCP_GRANT: Final = re.compile(r"[A-Za-z0-9]+(?:[-_][A-Za-z0-9]+)*__(?:\*|[A-Za-z0-9_-]+)")
"""`server__tool` or `server__*` (`mcp_settings.py` says what a server's name is)."""


def is_mcp_tool(name: str) -> bool:
    """Whether a tool's name is an MCP server's (`server__tool`): no built-in tool has `__`."""
    server, separator, tool = name.partition("__")
    return bool(server and separator and tool)


def parse_grants(text: str) -> list[str]:
    """The tools of a `--allow` value such as `shell,write,edit` or `time__*` (spaces allowed);
    a ValueError names an unknown one."""
    names = [name.strip() for name in text.split(",") if name.strip()]
    for name in names:
        if name not in GUARDED and not MCP_GRANT.fullmatch(name):
            raise ValueError(
                f"--allow: unknown tool {name!r} (the tools: {', '.join(GUARDED)}, and an MCP "
                "server's as NAME__tool or NAME__*)"
            )
    return names


def covers(grants: Iterable[str], tool: str) -> bool:
    """Whether a grant allows `tool`: its name, or `server__*` for a tool of that server."""
    for grant in grants:
        if grant == tool or (grant.endswith("__*") and tool.startswith(grant[:-1])):
            return True
    return False
