"""`evertalk mcp add|list|remove`: the MCP servers whose tools the model is offered.

    evertalk mcp add time -- mcp-server-time --local-timezone Europe/Paris
    evertalk mcp add docs --url http://127.0.0.1:8000/mcp
    evertalk mcp list
    evertalk mcp remove time

A running service takes the change between two turns (it watches config.toml). `evertalk mcp`
alone serves evertalk's own memory over MCP (`mcp_server.py`).
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from evertalk.config import ConfigError
from evertalk.mcp_client.edit import add_server, read_servers, remove_server
from evertalk.mcp_settings import SEPARATOR, McpServer


def run_mcp_command(args: argparse.Namespace, home: Path) -> int:
    try:
        if args.action == "add":
            return _add(args, home)
        if args.action == "remove":
            remove_server(home, args.name)
            print(f"removed the MCP server {args.name}")
            return 0
        return _list(home)
    except ConfigError as error:
        print(f"evertalk: {error}", file=sys.stderr)
        return 1


def _add(args: argparse.Namespace, home: Path) -> int:
    words: list[str] = list(args.command_line or [])
    if (args.url is None) == (not words):
        print(
            "evertalk: mcp add takes either `-- COMMAND ARGS…` or `--url URL`",
            file=sys.stderr,
        )
        return 2
    env: list[tuple[str, str]] = []
    for item in args.env or ():
        key, equals, value = item.partition("=")
        if not equals or not key:
            print(f"evertalk: --env takes NAME=VALUE, not {item!r}", file=sys.stderr)
            return 2
        env.append((key, value))
    if args.url is not None and env:
        print("evertalk: --env goes with a command, not with --url", file=sys.stderr)
        return 2
    if words and (missing := _not_a_program(words[0])) is not None:
        print(f"evertalk: mcp add {args.name}: {missing}", file=sys.stderr)
        return 2
    server = McpServer(
        args.name,
        command=words[0] if words else None,
        args=tuple(words[1:]),
        env=tuple(env),
        url=args.url,
    )
    add_server(home, server)
    print(
        f"added the MCP server {server.name}: {server.describe()}; its tools reach the model as "
        f"{server.name}{SEPARATOR}TOOL from the next turn (each call asks first, unless "
        f"--allow {server.name}{SEPARATOR}* or an answer 'always')"
    )
    return 0


def _not_a_program(command: str) -> str | None:
    """Why `command` cannot be started as the server (None when it can): a path that is no
    executable file, or a name found on no folder of PATH."""
    import shutil

    if os.sep in command:
        path = Path(command).expanduser()
        if path.is_file() and os.access(path, os.X_OK):
            return None
        return f"{command} is not an executable file"
    if shutil.which(command) is None:
        return f"`{command}` is not a program on PATH (install it first, or give its full path)"
    return None


def _list(home: Path) -> int:
    servers = read_servers(home).servers
    if not servers:
        print("no MCP servers are configured (add one: evertalk mcp add NAME -- COMMAND ARGS…)")
        return 0
    width = max(len(server.name) for server in servers)
    problems = _service_problems(home)
    for server in servers:
        kind = "http" if server.url is not None else "stdio"
        off = "  (disabled)" if not server.enabled else ""
        if server.name in problems:
            off = f"  (not running: {problems[server.name]})"
        print(f"{server.name:<{width}}  {kind}: {server.describe()}{off}")
    return 0


def _service_problems(home: Path) -> dict[str, str]:
    """What a running service says of the servers that do not run, by name; {} without one
    (or when it cannot be asked: the list is the file's either way)."""
    from evertalk.client.connection import ServiceError, connect, running
    from evertalk.protocol.replies import Status
    from evertalk.protocol.requests import GetStatus

    if not running(home):
        return {}
    try:
        with connect(home, "status") as connection:
            status = connection.request(GetStatus(), Status)
    except (ServiceError, OSError):
        return {}
    return dict(line.split(": ", 1) for line in status.mcp_problems if ": " in line)
