"""One configured MCP server, kept running: started, its tools listed, restarted when it dies.

A `ServerLink` runs in a task of its own for as long as the agent is open (`run`). Each round
starts the server with the SDK's `Client` (a command over stdio, or a URL), lists its tools
within `start_timeout` seconds, and then waits until the connection is lost: a stdio server's
output ends (it exited), or a call finds the connection closed. The next round starts after a
backoff (1 s, doubling to a minute; back to 1 s after a round that lasted a minute). Meanwhile
the tools it listed stay offered (the tool list is part of the cached prefix, SPEC §5), and a
call of one gets a one-line error saying the server is restarting.

A stdio server's standard error goes to `<home>/mcp/NAME.log`, anew at each start: its last
line says why a server that exits at once could not start.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from types import TracebackType
from typing import Any, Final, Literal, TextIO

import anyio
import mcp_types as types
from mcp import Client
from mcp.client._transport import ReadStream, TransportStreams
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.exceptions import MCPError
from mcp.shared.message import SessionMessage

from evertalk import __version__
from evertalk.mcp_client.names import offered_name
from evertalk.mcp_client.results import outcome_of
from evertalk.mcp_client.schemas import schema_problem
from evertalk.mcp_settings import McpServer
from evertalk.providers.base import Tool
from evertalk.store.secure import make_dir
from evertalk.terminal_text import one_line
from evertalk.tool_outcome import ToolOutcome, failure

FIRST_DELAY: Final = 1.0
LONGEST_DELAY: Final = 60.0
STEADY: Final = 60.0
"""A round that lasted this long was a working server: the next restart waits FIRST_DELAY."""
PAGES_MOST: Final = 100
"""Pages of a tool listing read at most: a server that never ends its list cannot hang a start."""
DESCRIPTION_MOST: Final = 4_000
"""Characters of a tool's description kept: every call carries the list."""
LOG_FOLDER: Final = "mcp"

State = Literal["starting", "ready", "restarting", "failed"]


class Lost(Exception):
    """The connection to the server ended; the message says how, in one line."""


class ServerLink:
    """One server: its state, the tools it offers the model, and calls to them."""

    def __init__(
        self,
        server: McpServer,
        *,
        start_timeout: float,
        home: Path | None,
        changed: Callable[[], None],
        warn: Callable[[str], None],
    ) -> None:
        self.server = server
        self.name = server.name
        self.start_timeout = start_timeout
        self.home = home
        self._changed = changed
        self._warn = warn
        self.state: State = "starting"
        self.problem: str | None = None  # why it is not ready, with when it is tried again
        self.tools: list[Tool] = []  # as offered, in a stable order: kept while it restarts
        self.names: dict[str, str] = {}  # offered name -> the server's own
        self.skipped: list[str] = []  # tools left out (a schema no API takes, a name taken)
        self.tried = anyio.Event()  # the first round has started the server, or failed to
        self._client: Client | None = None
        self._lost = anyio.Event()
        self._why_lost = ""
        self._state_changed = anyio.Event()
        self._said: str | None = None
        self._up = False  # the round under way reached `ready`

    # -- the rounds -----------------------------------------------------------------------

    async def run(self) -> None:
        """Start, serve, restart after a backoff: until cancelled."""
        delay = FIRST_DELAY
        while True:
            began, self._up = anyio.current_time(), False
            try:
                why = await self._round()
            except Exception as error:  # the SDK's, the OS's: the server is not there
                why = self._why_lost if self._lost.is_set() else _describe(error)
            why += self._last_words()
            self._client = None
            if anyio.current_time() - began >= STEADY:
                delay = FIRST_DELAY
            what = "stopped" if self._up else "cannot start again" if self.tools else "cannot start"
            self._set("restarting" if self.tools else "failed", f"{what}: {why}", delay)
            self.tried.set()
            await anyio.sleep(delay)
            delay = min(delay * 2, LONGEST_DELAY)

    async def _round(self) -> str:
        """One life of the server: why it ended (raises when it could not start)."""
        self._lost = anyio.Event()
        listed = anyio.Event()
        timed_out = False

        async def deadline(scope: anyio.CancelScope) -> None:
            nonlocal timed_out
            with anyio.move_on_after(self.start_timeout):
                await listed.wait()
                return
            timed_out = True
            scope.cancel()

        with contextlib.ExitStack() as files:
            errlog = files.enter_context(self._error_log())
            async with anyio.create_task_group() as group:
                group.start_soon(deadline, group.cancel_scope)
                async with self._client_for(errlog) as client:
                    tools = await _list_tools(client)
                    listed.set()
                    self._client = client
                    self._publish(tools)
                    self._up = True
                    self._set("ready", None)
                    self.tried.set()
                    await self._lost.wait()
                group.cancel_scope.cancel()
        if timed_out:
            raise Lost(f"it did not start and list its tools within {self.start_timeout:g} seconds")
        return self._why_lost

    @asynccontextmanager
    async def _client_for(self, errlog: TextIO) -> AsyncIterator[Client]:
        server = self.server
        transport: Any
        if server.url is not None:
            transport = streamable_http_client(server.url)
        else:
            params = StdioServerParameters(
                command=server.command or "",
                args=list(server.args),
                env=dict(server.env) or None,
            )
            transport = stdio_client(params, errlog=errlog)
        client = Client(
            _watched(transport, self._ended),
            client_info=types.Implementation(name="evertalk", version=__version__),
        )
        async with client:
            yield client

    def _ended(self) -> None:
        self.lose("it exited" if self.server.url is None else "the connection ended")

    def lose(self, why: str) -> None:
        """The connection is gone: the round ends, and the next one starts after the backoff."""
        if not self._lost.is_set():
            self._why_lost = why
            self._lost.set()
            self._client = None
            if self.state == "ready":  # calls meanwhile say so; `run` adds when it tries again
                self._set("restarting", f"stopped: {why}")

    @contextlib.contextmanager
    def _error_log(self) -> Iterator[TextIO]:
        """Where the server's standard error goes: its log file, or nowhere without a home."""
        path = self._log_path()
        if path is None:
            with open(os.devnull, "w", encoding="utf-8") as sink:
                yield sink
            return
        make_dir(path.parent)
        with open(path, "w", encoding="utf-8", opener=_private) as log:
            yield log

    def _log_path(self) -> Path | None:
        return None if self.home is None else self.home / LOG_FOLDER / f"{self.name}.log"

    def _last_words(self) -> str:
        """` (<the last line of its standard error>)`, when a stdio server left one."""
        path = self._log_path()
        if path is None or self.server.url is not None:
            return ""
        with contextlib.suppress(OSError):
            with path.open("rb") as log:
                log.seek(0, 2)
                log.seek(max(0, log.tell() - 4096))
                lines = log.read().decode("utf-8", "replace").strip().splitlines()
            if lines:
                return f" ({one_line(lines[-1])[:300]})"
        return ""

    # -- its tools --------------------------------------------------------------------------

    def _publish(self, listed: list[types.Tool]) -> None:
        """The tools as offered: `NAME__tool`, sorted by name; told when the list changes."""
        tools: list[Tool] = []
        names: dict[str, str] = {}
        skipped: list[str] = []
        for tool in sorted(listed, key=lambda tool: tool.name):
            name = offered_name(self.name, tool.name)
            problem = schema_problem(tool.input_schema)
            if name in names or problem is not None:
                skipped.append(f"{tool.name} ({problem or 'its name is taken'})")
                continue
            names[name] = tool.name
            tools.append(Tool(name, self._description(tool), tool.input_schema))
        if skipped and skipped != self.skipped:
            self._warn(f"mcp: the server {self.name}: tools left out: {'; '.join(skipped)}")
        self.skipped = skipped
        if tools != self.tools:
            self.tools, self.names = tools, names
            self._changed()

    def _description(self, tool: types.Tool) -> str:
        text = (tool.description or "").strip() or f"The tool {tool.name}."
        if len(text) > DESCRIPTION_MOST:
            text = text[: DESCRIPTION_MOST - 1] + "…"
        return f"(from the MCP server {self.name}) {text}"

    async def call(self, name: str, arguments: dict[str, Any], timeout: float) -> ToolOutcome:
        """Call the tool offered as `name`; every failure is a one-line error outcome."""
        client = self._client
        if client is None or self.state != "ready":
            if self.state == "restarting":
                return failure(
                    f"the MCP server {self.name} is restarting ({self.problem}): try the call "
                    "again in a moment"
                )
            return failure(f"the MCP server {self.name} is not running ({self.problem})")
        try:
            with anyio.fail_after(timeout):
                result = await client.call_tool(self.names[name], arguments)
        except TimeoutError:
            return failure(
                f"the MCP server {self.name} did not answer within {timeout:g} seconds "
                "([mcp] call_timeout in config.toml); the call was given up"
            )
        except MCPError as error:
            if error.code == types.CONNECTION_CLOSED or self._lost.is_set():
                self.lose("it stopped during a call")
                return failure(
                    f"the MCP server {self.name} stopped during the call; it is restarting, "
                    "and the call was not finished"
                )
            return failure(f"the MCP server {self.name} refused the call: {error.message}")
        except Exception as error:  # a broken connection, an answer that is not MCP
            self.lose(f"a call failed: {_describe(error)}")
            return failure(f"the MCP server {self.name} failed the call: {_describe(error)}")
        return outcome_of(result)

    # -- its state --------------------------------------------------------------------------

    def _set(self, state: State, problem: str | None, delay: float | None = None) -> None:
        if delay is not None and problem is not None:
            problem += f"; trying again in {delay:g} s"
        self.state, self.problem = state, problem
        if problem is not None:
            said = problem.split("; trying again")[0]
            if said != self._said:  # each new problem once, not each retry
                self._said = said
                self._warn(f"mcp: the server {self.name} {said}")
        else:
            self._said = None
        self._state_changed.set()
        self._state_changed = anyio.Event()

    async def ready(self) -> None:
        """Until the server runs (again)."""
        while self.state != "ready":
            await self._state_changed.wait()

    def status(self) -> str | None:
        """One line for the status when the server is not running; None when it is (or still
        starting)."""
        if self.state in ("ready", "starting"):
            return None
        return f"{self.name}: {self.problem}"


class _Watched:
    """The transport's read stream, which tells when it ends: a stdio server's output closes
    when the server exits, whether or not a call is waiting."""

    def __init__(self, inner: ReadStream[SessionMessage | Exception], ended: Callable[[], None]):
        self.inner = inner
        self.ended = ended

    @property
    def last_context(self) -> object:
        return getattr(self.inner, "last_context", None)

    async def receive(self) -> SessionMessage | Exception:
        try:
            return await self.inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self.ended()
            raise

    async def aclose(self) -> None:
        await self.inner.aclose()

    def __aiter__(self) -> _Watched:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def __aenter__(self) -> _Watched:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc_val: BaseException | None,
        exc_tb: TracebackType | None,
    ) -> bool | None:
        await self.aclose()
        return None


@asynccontextmanager
async def _watched(transport: Any, ended: Callable[[], None]) -> AsyncIterator[TransportStreams]:
    async with transport as (read, write):
        yield _Watched(read, ended), write


async def _list_tools(client: Client) -> list[types.Tool]:
    tools: list[types.Tool] = []
    cursor: str | None = None
    for _ in range(PAGES_MOST):
        page = await client.list_tools(cursor=cursor)
        tools += page.tools
        cursor = page.next_cursor
        if cursor is None:
            break
    return tools


def _describe(error: BaseException) -> str:
    """One line: the one error inside a group, an OS error's reason, else `Type: message`."""
    while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        error = error.exceptions[0]
    if isinstance(error, Lost):
        return str(error)
    if isinstance(error, FileNotFoundError):
        return f"{error.filename or 'the command'}: no such program"
    if isinstance(error, OSError):
        return f"{error.filename or 'the command'}: {error.strerror or error}"
    if isinstance(error, MCPError):
        return one_line(error.message)
    text = one_line(str(error))
    return f"{type(error).__name__}: {text}" if text else type(error).__name__


def _private(path: str, flags: int) -> int:
    return os.open(path, flags, 0o600)
