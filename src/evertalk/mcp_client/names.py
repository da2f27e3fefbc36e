"""The names the model calls a server's tools by: `NAME__tool`.

The APIs take tool names of letters, digits, `_` and `-`, 64 characters at most (OpenAI's bound;
Anthropic's is 128). An MCP tool's name may hold a `.` or a `/`, or be longer: those characters
become `_`, and a long name is cut, with a short hash of the whole so that two long names that
begin alike stay apart.
"""

from __future__ import annotations

import hashlib
import re
from typing import Final

from evertalk.mcp_settings import SEPARATOR

NAME_MOST: Final = 64
_NOT_ALLOWED: Final = re.compile(r"[^A-Za-z0-9_-]")


def offered_name(server: str, tool: str) -> str:
    """`server__tool`, within what every API takes."""
    name = f"{server}{SEPARATOR}{_NOT_ALLOWED.sub('_', tool)}"
    if len(name) <= NAME_MOST:
        return name
    digest = hashlib.sha256(tool.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"{name[: NAME_MOST - 9]}_{digest}"


def server_of(name: str) -> str | None:
    """The server's part of an offered name; None for a name without the separator."""
    server, separator, tool = name.partition(SEPARATOR)
    return server if separator and server and tool else None
