"""`[mcp]` in config.toml: the MCP servers whose tools the model may call, and their deadlines.

    [mcp]
    call_timeout = 120        # seconds a tool call may take
    start_timeout = 30        # seconds a server may take to start and list its tools

    [mcp.servers.time]        # a server started as a command, spoken to over its stdin/stdout
    command = "mcp-server-time"
    args = ["--local-timezone", "Europe/Paris"]
    env = { TZ = "Europe/Paris" }

    [mcp.servers.docs]        # a server that listens (streamable HTTP)
    url = "http://127.0.0.1:8000/mcp"
    enabled = false           # kept, not started

A server's tools reach the model as `NAME__tool`, so a name is letters, digits and single `-`
or `_` between them: `__` is the separator. Standard library only: every command reads this.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

SEPARATOR: Final = "__"
"""Between a server's name and its tool's in the name the model calls."""
NAME_RULE: Final = re.compile(r"[A-Za-z0-9]+(?:[-_][A-Za-z0-9]+)*")
NAME_MOST: Final = 32
"""Characters of a server's name at most: the APIs take tool names of 64 at most."""
CALL_TIMEOUT: Final = 120.0
START_TIMEOUT: Final = 30.0
SERVER_KEYS: Final = ("command", "args", "env", "url", "enabled")
TABLE_KEYS: Final = ("servers", "call_timeout", "start_timeout")
SECRET_NAMES: Final = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH", re.I)
"""Variables of a server's `env` whose values are kept out of the log, as the API key is."""


@dataclass(frozen=True)
class McpServer:
    """One configured server: a command (stdio) or a `url` (streamable HTTP)."""

    name: str
    command: str | None = None
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()  # added to the few variables the SDK passes on
    url: str | None = None
    enabled: bool = True

    def describe(self) -> str:
        """`mcp-server-time --local-timezone UTC`, or the URL: what `mcp list` shows."""
        if self.url is not None:
            return self.url
        return " ".join([self.command or "", *self.args])


@dataclass(frozen=True)
class McpSettings:
    servers: tuple[McpServer, ...] = ()  # sorted by name: the tools' order follows it
    call_timeout: float = CALL_TIMEOUT
    start_timeout: float = START_TIMEOUT

    @property
    def enabled(self) -> tuple[McpServer, ...]:
        return tuple(server for server in self.servers if server.enabled)

    def secret_values(self) -> set[str]:
        """The values of the servers' variables named like credentials (`GITHUB_TOKEN`)."""
        return {
            value
            for server in self.servers
            for name, value in server.env
            if SECRET_NAMES.search(name)
        }


def name_problem(name: str) -> str | None:
    """Why `name` cannot name a server, or None."""
    if not NAME_RULE.fullmatch(name) or len(name) > NAME_MOST:
        return (
            f"{name!r} cannot name an MCP server: letters, digits, and single - or _ between "
            f"them, at most {NAME_MOST} characters"
        )
    return None


def parse_mcp(table: object) -> McpSettings:
    """The `[mcp]` table as read by tomllib (None: no table); a ValueError says, in one line,
    which setting is wrong (the caller adds the file's name)."""
    if table is None:
        return McpSettings()
    if not isinstance(table, dict):
        raise ValueError("`mcp` must be a table ([mcp])")
    for key in table:
        if key not in TABLE_KEYS:
            raise ValueError(f"unknown setting `mcp.{key}`")
    servers = table.get("servers", {})
    if not isinstance(servers, dict):
        raise ValueError("`mcp.servers` must be a table ([mcp.servers.NAME])")
    return McpSettings(
        servers=tuple(_server(name, servers[name]) for name in sorted(servers)),
        call_timeout=_seconds(table, "call_timeout", CALL_TIMEOUT),
        start_timeout=_seconds(table, "start_timeout", START_TIMEOUT),
    )


def _seconds(table: Mapping[str, object], key: str, default: float) -> float:
    value = table.get(key, default)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"`mcp.{key}` must be a number of seconds")
    if not math.isfinite(value) or value <= 0:
        raise ValueError(f"`mcp.{key}` must be a positive number of seconds")
    return float(value)


def _server(name: str, table: object) -> McpServer:
    where = f"`mcp.servers.{name}`"
    problem = name_problem(name)
    if problem is not None:
        raise ValueError(problem)
    if not isinstance(table, dict):
        raise ValueError(f"{where} must be a table ([mcp.servers.{name}])")
    for key in table:
        if key not in SERVER_KEYS:
            raise ValueError(
                f"{where}: unknown setting `{key}` (its settings: command, args, env, url, enabled)"
            )
    command, url = table.get("command"), table.get("url")
    if (command is None) == (url is None):
        raise ValueError(f"{where} needs either `command` (stdio) or `url` (HTTP), not both")
    if command is not None and (not isinstance(command, str) or not command.strip()):
        raise ValueError(f"{where}: `command` must be a program's name or path")
    if url is not None and (not isinstance(url, str) or not re.match(r"https?://[^\s/]", url)):
        raise ValueError(f"{where}: `url` must be an http:// or https:// address")
    args = table.get("args", [])
    if not isinstance(args, list) or not all(isinstance(arg, str) for arg in args):
        raise ValueError(f"{where}: `args` must be a list of strings")
    env = table.get("env", {})
    if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
        raise ValueError(f"{where}: `env` must be a table of strings")
    if url is not None and (args or env):
        raise ValueError(f"{where}: `args` and `env` go with `command`, not with `url`")
    enabled = table.get("enabled", True)
    if not isinstance(enabled, bool):
        raise ValueError(f"{where}: `enabled` must be true or false")
    return McpServer(
        name,
        command=command,
        args=tuple(args),
        env=tuple(sorted(env.items())),
        url=url,
        enabled=enabled,
    )
