"""Shared pieces of the terminal app's tests (no tests of its own).

A home folder whose config points at a fake; the app run by Textual's Pilot, a client of a real
service (`service/server.py`) run in the test's own event loop and reached over its real Unix
socket. The service's agent talks to the in-process Anthropic fake through the real SDK (each
agent the service opens, the first and one after each /setup, gets a provider with the key
config.toml holds then); a service that stops is started again when the app reconnects. Waiting
for what the screen shows.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import TaskGroup, TaskStatus
from textual.pilot import Pilot

from evertalk.agent.session import Agent
from evertalk.chat import Chat
from evertalk.client.remote import Remote, ServiceError, open_remote
from evertalk.config import load_config
from evertalk.providers.anthropic import AnthropicProvider
from evertalk.service.server import AgentOpener, Service, serve
from evertalk.tui.app import ChatApp
from evertalk.tui.widgets import OutputRow
from fakes import IN_PROCESS_URL, AnthropicFake, Call, Script, async_client, summarizer
from home_config import API_KEY as API_KEY
from home_config import MEMORY_MODEL as MEMORY_MODEL
from home_config import MODEL as MODEL
from home_config import write_config as write_config
from polling import until

SIZE = (120, 40)


def is_compaction(call: Call) -> bool:
    return call.body.get("tool_choice") in ({"type": "none"}, "none")


def turn_bodies(fake: AnthropicFake) -> list[dict[str, Any]]:
    """The body of each turn call (not a compaction), in order."""
    bodies = [record.body for record in fake.records if record.body is not None]
    return [body for body in bodies if body.get("tool_choice") not in ({"type": "none"}, "none")]


def turn_models(fake: AnthropicFake) -> list[str]:
    """The model each turn call asked for, in order."""
    return [str(body["model"]) for body in turn_bodies(fake)]


def script() -> Script:
    """Compactions get a 100-byte summary; turns are scripted with `push`."""
    return Script().route(is_compaction, summarizer(100))


def workdir_of(home: Path) -> Path:
    """The folder the app's tools work in: beside the home, which the tools keep out of."""
    workdir = home.parent / "work"
    workdir.mkdir(exist_ok=True)
    return workdir


def fake_opener(home: Path, fake: AnthropicFake, **options: Any) -> AgentOpener:
    """Opens the service's agents on the in-process fake, with the key config.toml holds;
    `options` go to Agent.open (limits, a clock, …)."""

    @asynccontextmanager
    async def open_agent(service: Service) -> AsyncIterator[Agent]:
        key = load_config(home).api_key
        client = async_client(fake.app)
        provider = AnthropicProvider(
            key.reveal() if key else None, IN_PROCESS_URL, http_client=client
        )
        try:
            async with Agent.open(
                home, asker=service, provider=provider, workdir=workdir_of(home), **options
            ) as agent:
                yield agent
        finally:
            await provider.aclose()

    return open_agent


class ServiceHost:
    """The service of one test, in its event loop: started at the first connection, and again
    at a connection after it stopped."""

    def __init__(self, home: Path, opener: AgentOpener, group: TaskGroup) -> None:
        self.home = home
        self.opener = opener
        self.group = group
        self.service: Service | None = None
        self.ended = anyio.Event()
        self.ended.set()
        self.starts = 0

    async def connect(
        self,
        *,
        since: int | None = None,
        start: bool = True,
        client: str = "app",
        edits: int | None = None,
    ) -> Remote:
        """A client's connection (`since`: one that follows the log); without `start`, only
        to a service that runs."""
        stopped = self.service is None or self.service.stopping.is_set()
        if stopped and not start:
            raise ServiceError("no evertalk service is running for this home")
        if stopped:
            await self.ended.wait()
            self.ended = anyio.Event()
            try:
                self.service = await self.group.start(self._serve)
            except Exception as error:  # as a client sees a service that cannot start
                self.ended.set()
                raise ServiceError(f"cannot serve: {error}") from None
            self.starts += 1
        return await open_remote(self.home, client, start=False, since=since, edits=edits)

    async def _serve(self, *, task_status: TaskStatus[Service]) -> None:
        try:
            await serve(self.home, 3600, self.opener, signals=False, task_status=task_status)
        finally:
            self.ended.set()

    async def stop(self) -> None:
        """Stop the service; one still waiting for a summary in flight (a fake that never
        answers) is cut short after a moment."""
        if self.service is not None:
            self.service.stop("the test is over")
        with anyio.move_on_after(5):
            await self.ended.wait()
        self.group.cancel_scope.cancel()


@asynccontextmanager
async def hosted(home: Path, opener: AgentOpener) -> AsyncIterator[ServiceHost]:
    """A ServiceHost whose service (and its tasks) end with the block."""
    async with anyio.create_task_group() as group:
        host = ServiceHost(home, opener, group)
        try:
            yield host
        finally:
            await host.stop()


HOSTS: dict[int, ServiceHost] = {}


def agent_of(app: ChatApp) -> Agent:
    """The agent of the service the app runs against (in the test's own process)."""
    service = HOSTS[id(app)].service
    assert service is not None and service.agent is not None
    return service.agent


@asynccontextmanager
async def running(
    home: Path,
    fake: AnthropicFake,
    *,
    editor: Callable[[Path], None] | None = None,
    size: tuple[int, int] = SIZE,
    opener: AgentOpener | None = None,
) -> AsyncIterator[Pilot[int]]:
    """The app, a client of a service on the fake, driven by a Pilot once it shows the log;
    everything closed at the end."""
    async with hosted(home, opener or fake_opener(home, fake)) as host:
        app = ChatApp(home, connector=host.connect, editor=editor, workdir=workdir_of(home))
        HOSTS[id(app)] = host
        async with app.run_test(size=size) as pilot:
            with anyio.fail_after(20):
                await app.ready.wait()
            await pilot.pause()
            yield pilot


def app_of(pilot: object) -> ChatApp:
    """The chat app a Pilot drives."""
    app = pilot.app  # type: ignore[attr-defined]
    assert isinstance(app, ChatApp)
    return app


async def wait_until(
    pilot: Pilot[Any], ready: Callable[[], object], *, timeout: float = 10, what: str = ""
) -> None:
    """Let the app run until `ready()` holds."""
    await until(ready, timeout, pause=pilot.pause)
    del what


async def type_text(pilot: Pilot[Any], text: str) -> None:
    """Type `text` into the focused input as keys (a newline as Ctrl+J)."""
    keys: list[str] = []
    for char in text:
        keys.append("ctrl+j" if char == "\n" else char)
    await pilot.press(*keys)


def log_of(home: Path) -> list[tuple[str, str]]:
    """(kind, text) of every message of the chat, oldest first."""
    with Chat.open(home / "chat", readonly=True) as chat:
        return [
            (record.kind, record.text)
            for record in (chat.store.read_message(i) for i in range(chat.t))
        ]


async def enter_line(pilot: Pilot[Any], text: str) -> None:
    """Put `text` in the input at once (typing is tested elsewhere) and press Enter."""
    from evertalk.tui.widgets import PromptInput

    prompt = pilot.app.query_one(PromptInput)
    prompt.load_text(text)
    prompt.move_cursor(prompt.document.end)
    await pilot.press("enter")


def outputs(app: ChatApp) -> list[str]:
    """The text of each output row (what a command said), in order."""
    return [row.text for row in app.query(OutputRow)]


async def command_row(pilot: Pilot[Any], text: str) -> OutputRow:
    """Type a command; the output row it adds."""
    app = app_of(pilot)
    count = len(app.query(OutputRow))
    await enter_line(pilot, text)
    await wait_until(pilot, lambda: len(app.query(OutputRow)) > count)
    return list(app.query(OutputRow))[-1]


async def run_command(pilot: Pilot[Any], text: str) -> str:
    """Type a command; the text of the output row it adds."""
    return (await command_row(pilot, text)).text
