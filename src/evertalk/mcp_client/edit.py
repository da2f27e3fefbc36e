"""Adding and removing `[mcp.servers.NAME]` in config.toml, as `evertalk mcp add|remove` do.

The file is changed with tomlkit, not rewritten: the user's comments and other settings stay.
A change that would make the file unreadable is refused before it is written.
"""

from __future__ import annotations

from collections.abc import MutableMapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evertalk.config import ConfigError, config_path, load_config
from evertalk.mcp_settings import McpServer, McpSettings, name_problem, parse_mcp
from evertalk.store.secure import make_dir, write_atomic

if TYPE_CHECKING:
    from tomlkit import TOMLDocument


def read_servers(home: Path) -> McpSettings:
    """The `[mcp]` settings in force (ConfigError: the file cannot be used)."""
    return load_config(home).mcp


def add_server(home: Path, server: McpServer) -> None:
    """Write `[mcp.servers.NAME]`; a server of that name already there is a ConfigError."""
    import tomlkit

    problem = name_problem(server.name)
    if problem is not None:
        raise ConfigError(problem)
    document = _document(home)
    servers = _servers_table(document, create=True)
    assert servers is not None
    if server.name in servers:
        raise ConfigError(
            f"an MCP server named {server.name!r} is configured already: "
            f"`evertalk mcp remove {server.name}` first"
        )
    table = tomlkit.table()
    if server.url is not None:
        table["url"] = server.url
    else:
        table["command"] = server.command
        table["args"] = list(server.args)
        if server.env:
            env = tomlkit.inline_table()
            env.update(dict(server.env))
            table["env"] = env
    servers[server.name] = table
    _write(home, document)


def remove_server(home: Path, name: str) -> None:
    """Take `[mcp.servers.NAME]` out; ConfigError when there is none."""
    document = _document(home)
    servers = _servers_table(document, create=False)
    if servers is None or name not in servers:
        raise ConfigError(f"no MCP server named {name!r} is configured (`evertalk mcp list`)")
    del servers[name]
    _write(home, document)


def _document(home: Path) -> TOMLDocument:
    """config.toml as a tomlkit document (an empty one when there is no file)."""
    import tomlkit
    from tomlkit.exceptions import ParseError

    path = config_path(home)
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return tomlkit.document()
    except (OSError, UnicodeDecodeError) as error:
        raise ConfigError(f"{path}: cannot read: {error}") from None
    try:
        return tomlkit.parse(text)
    except ParseError as error:
        raise ConfigError(
            f"{path}: not valid TOML (line {error.line}, column {error.col}), so it is not "
            "changed: fix it first"
        ) from None


def _servers_table(document: TOMLDocument, *, create: bool) -> MutableMapping[str, Any] | None:
    """`[mcp.servers]` of the document (made, super-tables that print no header of their own,
    when `create`); None when it is not there."""
    mcp = _table(document, "mcp", "`mcp` in config.toml must be a table ([mcp])", create=create)
    if mcp is None:
        return None
    return _table(mcp, "servers", "`mcp.servers` in config.toml must be a table", create=create)


def _table(
    parent: MutableMapping[str, Any], key: str, wrong: str, *, create: bool
) -> MutableMapping[str, Any] | None:
    """The table `key` of `parent` (made, a super-table, when `create`); None when it is not
    there; ConfigError saying `wrong` when it is not a table."""
    import tomlkit

    table = parent.get(key)
    if table is None:
        if not create:
            return None
        table = parent[key] = tomlkit.table(is_super_table=True)
    if not isinstance(table, dict):
        raise ConfigError(wrong)
    return table


def _write(home: Path, document: TOMLDocument) -> None:
    import tomllib

    import tomlkit

    text = tomlkit.dumps(document)
    path = config_path(home)
    try:
        parse_mcp(tomllib.loads(text).get("mcp"))
    except ValueError as error:
        raise ConfigError(f"{path}: {error}") from None
    make_dir(home)
    try:
        write_atomic(path, text.encode("utf-8"))
    except OSError as error:
        raise ConfigError(f"cannot write {path}: {error.strerror or error}") from None
