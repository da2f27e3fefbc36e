"""The MCP servers the tests start, and their entries in a home's config: the reference time
server (installed with the test dependencies) and the flaky one of tests/mcp_client."""

from __future__ import annotations

import sys
from pathlib import Path

TIME_SERVER = Path(sys.executable).parent / "mcp-server-time"
FLAKY = Path(__file__).parent / "mcp_client" / "flaky_server.py"


def add_servers(home: Path, text: str) -> None:
    """Append `text` (TOML: MCP settings, server entries) to `home`'s config."""
    with (home / "config.toml").open("a") as config:
        config.write("\n" + text)


def flaky_entry(env: str = "{}") -> str:
    """The TOML entry of the flaky server, named `flaky`; `env`: an inline table."""
    return f'[mcp.servers.flaky]\ncommand = "{sys.executable}"\nargs = ["{FLAKY}"]\nenv = {env}\n'


def time_server(home: Path) -> None:
    """The time server in `home`'s config, on UTC."""
    add_servers(
        home,
        f'[mcp.servers.time]\ncommand = "{TIME_SERVER}"\nargs = ["--local-timezone", "UTC"]\n',
    )


def flaky_server(home: Path, call_timeout: float = 30, env: str = "{}") -> None:
    """The flaky server in `home`'s config, its calls given `call_timeout` seconds."""
    add_servers(home, f"[mcp]\ncall_timeout = {call_timeout}\n\n" + flaky_entry(env))
