"""The MCP servers of config.toml as the agent's tools (issue 25 §1).

    async with McpTools.open(config.mcp, home) as mcp:
        mcp.definitions      # every running server's tools, as `NAME__tool`
        await mcp.call("time__get_current_time", {"timezone": "UTC"})

Each enabled server is started once, in the background, when the agent opens (`link.py`); a turn
waits for the first start of each (at most `start_timeout` seconds) so that its tools are there
from the first turn. `definitions` is in a stable order (servers by name, then each server's
tools by name) and changes only when a server's listing does: the tool list is part of the
cached prefix, byte-identical on every call (SPEC §5). A server that cannot start is a line of
`problems()` (the status), never a failed turn.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio

from evertalk.mcp_settings import McpServer, McpSettings
from evertalk.providers.base import Tool
from evertalk.tool_outcome import ToolOutcome, failure

if TYPE_CHECKING:
    from evertalk.mcp_client.link import ServerLink


class McpTools:
    """The servers' links, and the tools they offer."""

    def __init__(self, settings: McpSettings, home: Path | None = None) -> None:
        self.settings = settings
        self.home = home
        # the SDK loads only when a server is configured: it takes a third of a second
        by_name = sorted(settings.enabled, key=lambda server: server.name)  # the tools' order
        self.links = [self._link(server) for server in by_name]
        self.definitions: list[Tool] = []
        self.on_change: Callable[[], None] | None = None  # the list of definitions changed
        self.on_warning: Callable[[str], None] | None = None  # a server failed: one line
        self._by_name: dict[str, ServerLink] = {}

    def _link(self, server: McpServer) -> ServerLink:
        from evertalk.mcp_client.link import ServerLink

        return ServerLink(
            server,
            start_timeout=self.settings.start_timeout,
            home=self.home,
            changed=self._changed,
            warn=self._warn,
        )

    @classmethod
    @asynccontextmanager
    async def open(cls, settings: McpSettings, home: Path | None = None) -> AsyncIterator[McpTools]:
        """The servers run while this is open, and are stopped at its end."""
        tools = cls(settings, home)
        if not tools.links:
            yield tools
            return
        async with anyio.create_task_group() as group:
            for link in tools.links:
                group.start_soon(link.run)
            try:
                yield tools
            finally:
                group.cancel_scope.cancel()

    def link(self, server: str) -> ServerLink:
        return next(link for link in self.links if link.name == server)

    async def started(self) -> None:
        """Until every server has been started once, or has failed to."""
        for link in self.links:
            await link.tried.wait()

    def offers(self, name: str) -> bool:
        return name in self._by_name

    async def call(self, name: str, arguments: dict[str, Any]) -> ToolOutcome:
        link = self._by_name.get(name)
        if link is None:
            return failure(f"there is no tool {name!r}")
        return await link.call(name, arguments, self.settings.call_timeout)

    def problems(self) -> tuple[str, ...]:
        """`NAME: cannot start: …; trying again in 8 s`, one per server that is not running."""
        lines = [link.status() for link in self.links]
        return tuple(line for line in lines if line is not None)

    def _changed(self) -> None:
        self.definitions = [tool for link in self.links for tool in link.tools]
        self._by_name = {tool.name: link for link in self.links for tool in link.tools}
        if self.on_change is not None:
            self.on_change()

    def _warn(self, line: str) -> None:
        if self.on_warning is not None:
            self.on_warning(line)
