"""The parts a session is made of, opened and closed together (`open_parts`), and the work
that runs beside its turns: the compactor, kept running (`keep_compacting`), and for a chat in
a database, the other machines followed (`share`)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import AsyncExitStack, asynccontextmanager, closing
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING

import anyio
from anyio.abc import TaskGroup

from evertalk.agent.outbox import Outbox
from evertalk.agent.permissions import Asker
from evertalk.agent.policy import Policy
from evertalk.agent.tools import Toolbox
from evertalk.agent.turn import Limits, explain
from evertalk.chat import Chat
from evertalk.compactor.service import Compactor
from evertalk.config import secret_values
from evertalk.ledger import Ledger, ledger_path
from evertalk.mcp_client.tools import McpTools
from evertalk.mcp_settings import McpSettings
from evertalk.memory.budget import Budget
from evertalk.providers.base import Provider
from evertalk.providers.lane import turns_first
from evertalk.runtime import Runtime, configuration_problem
from evertalk.store.errors import StoreError
from evertalk.terminal_text import one_line

if TYPE_CHECKING:
    from evertalk.agent.sharing import Sharing

RESTART_SECONDS = 5.0
"""A compactor stopped by a bug starts again after this long: a session without one would
leave every new message a placeholder, and turns would see less and less."""


class NotConfigured(Exception):
    """No provider can be called: no API key anywhere. The message is one line."""


@dataclass(frozen=True)
class Parts:
    """What a session opens: its chat, the turns' provider (behind the turn lane), a
    compactor, the tools and the MCP servers; `stack` closes them."""

    home: Path
    runtime: Runtime
    chat: Chat
    provider: Provider
    compactor: Compactor
    toolbox: Toolbox
    ledger: Ledger
    mcp: McpTools
    stack: AsyncExitStack


@dataclass(frozen=True)
class Options:
    """What a session was asked for beside its config, each None for the default: where the
    tools work, the clock, the turns' limits, and the longest a turn waits for a chat that is
    behind (`catch_up.py`)."""

    workdir: Path | None = None
    clock: Callable[[], datetime] | None = None
    limits: Limits | None = None
    catch_up_timeout: float | None = None


@asynccontextmanager
async def open_parts(
    home: Path, *, asker: Asker | None, granted: Iterable[str], provider: Provider | None
) -> AsyncIterator[Parts]:
    """Open the chat (its lock: `ChatLocked` propagates), the runtime, the provider (gated;
    `NotConfigured` without a key) unless one is given, a compactor and the tools; all are
    closed at the end."""
    runtime = Runtime.load(home)
    if provider is None and (problem := configuration_problem(home, runtime.config)):
        raise NotConfigured(problem)
    # the views' budgets follow the turn model's window (a change refits them, said once)
    budget = Budget.for_window(runtime.config.turn.context_window)
    async with AsyncExitStack() as stack:
        search = runtime.config.memory.search  # keeps the search index as records come
        chat = stack.enter_context(closing(await _opened_chat(home, runtime, budget, search)))
        turns, memory = await stack.enter_async_context(_providers(runtime, provider))
        copy = chat.usage_copy()  # a shared chat keeps every machine's calls in its ledger
        ledger = stack.enter_context(closing(Ledger(ledger_path(home), copy)))
        lane = runtime.turn_lane()  # turns first on a server that serves one at a time
        compactor = Compactor(
            chat,
            memory,
            runtime.compactor_settings(),
            system=runtime.system,
            tools=runtime.tools,
            ledger=ledger,
            secrets=secret_values(runtime.config),
            lane=lane,
        )
        policy = Policy(runtime.config.tools, granted=granted, interactive=asker is not None)
        # no servers to start when the model is offered no tools
        servers = runtime.config.mcp if runtime.tools else McpSettings()
        mcp = await stack.enter_async_context(McpTools.open(servers, home))
        toolbox = Toolbox(policy, asker, mcp)
        yield Parts(
            home, runtime, chat, turns_first(turns, lane), compactor, toolbox, ledger, mcp, stack
        )


@asynccontextmanager
async def _providers(
    runtime: Runtime, given: Provider | None
) -> AsyncIterator[tuple[Provider, Provider]]:
    """The turns' provider and the compactor's: the given one serves both; else the configured
    ones, closed at the end (shielded: a cancelled session still closes its connections)."""
    if given is not None:
        yield given, given
        return
    turns = runtime.provider()
    # its own provider when the compactor calls another server
    memory = runtime.memory_provider(turns)
    try:
        yield turns, memory
    finally:
        with anyio.CancelScope(shield=True):
            await turns.aclose()
            if memory is not turns:
                await memory.aclose()


def _open_chat(home: Path, runtime: Runtime, budget: Budget, search: bool) -> Chat:
    """The home's chat: in its folder, or in the database `[store] url` names, with the
    folder kept for what belongs to this machine."""
    url = runtime.config.store_url
    if url is None:
        return Chat.open(home / "chat", budget=budget, search=search)
    from evertalk.pgstore.session import DatabaseDown, PgSession
    from evertalk.shared_chat import SharedChat, machine_name

    session = PgSession(url, machine_name(home))
    lease = runtime.config.store_lease_seconds
    try:
        chat = SharedChat.open_shared(session, home / "chat", budget=budget, lease_seconds=lease)
    except DatabaseDown:  # the service does not start: nothing tries again
        raise StoreError(session.down_line or "the database cannot be reached") from None
    if search:
        chat.warnings.append("memory: search is kept for a chat in files only, not in a database")
    return chat


async def _opened_chat(home: Path, runtime: Runtime, budget: Budget, search: bool) -> Chat:
    """`_open_chat`; one in a database in a worker thread, as it waits for the database."""
    if runtime.config.store_url is None:
        return _open_chat(home, runtime, budget, search)
    return await anyio.to_thread.run_sync(_open_chat, home, runtime, budget, search)


async def keep_compacting(compactor: Compactor, warn: Callable[[str], None]) -> None:
    """The compactor, for the whole session. A bug that stops it is reported (once for the
    same error) and it starts again: turns meanwhile see placeholders."""
    said = None
    while True:
        try:
            await compactor.run()
        except Exception as error:
            why = one_line(_describe(error))
            if why != said:
                said = why
                warn(
                    f"memory: the compactor stopped ({why}); it starts again in "
                    f"{RESTART_SECONDS:g} seconds"
                )
            await anyio.sleep(RESTART_SECONDS)


def _describe(error: BaseException) -> str:
    """`Type: message`, of the one error inside a task group's group when there is one."""
    while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        error = error.exceptions[0]
    return explain(error)


def share(parts: Parts, outbox: Outbox, group: TaskGroup) -> Sharing:
    """Follow the other machines of a shared chat, and take turns with them."""
    from evertalk.agent.sharing import Sharing
    from evertalk.shared_chat import SharedChat

    chat, url = parts.chat, parts.runtime.config.store_url
    assert isinstance(chat, SharedChat) and url is not None
    sharing = Sharing(chat, url, parts.compactor, outbox.others_logged, outbox.warn)
    parts.stack.callback(sharing.close)
    group.start_soon(sharing.follow)
    return sharing
