"""Shared pieces of the terminal app's tests (no tests of its own).

A home folder whose config points at a fake; the app run by Textual's Pilot with the real Agent
talking to the in-process Anthropic fake through the real SDK (each agent the app opens, the first
and one after each /setup, gets a provider with the key config.toml holds then); waiting for what
the screen shows.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
from textual.pilot import Pilot

from evertalk.agent.session import Agent
from evertalk.chat import Chat
from evertalk.config import load_config
from evertalk.providers.anthropic import AnthropicProvider
from evertalk.tui.app import ChatApp, hosting
from fakes import IN_PROCESS_URL, AnthropicFake, Call, Script, async_client, summarizer

API_KEY = "sk-ant-test-SECRET-0123456789"
MODEL = "claude-sonnet-5-5"
MEMORY_MODEL = "claude-haiku-5-5"
SIZE = (120, 40)


def write_config(
    home: Path, *, base_url: str | None = None, api_key: str = API_KEY, **tools: str
) -> None:
    home.mkdir(parents=True, exist_ok=True)
    lines = ['provider = "anthropic"', f'model = "{MODEL}"', f'api_key = "{api_key}"']
    if base_url is not None:
        lines.append(f'base_url = "{base_url}"')
    lines += ["", "[memory]", f'model = "{MEMORY_MODEL}"']
    if tools:
        lines += ["", "[tools]", *(f'{name} = "{policy}"' for name, policy in tools.items())]
    (home / "config.toml").write_text("\n".join(lines) + "\n")
    (home / "config.toml").chmod(0o600)  # as evertalk writes it: a key others can read is warned of


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


def fake_opener(
    home: Path, fake: AnthropicFake
) -> Callable[[ChatApp], AbstractAsyncContextManager[Agent]]:
    """Opens the app's agents on the in-process fake, with the key config.toml holds."""

    @asynccontextmanager
    async def open_agent(app: ChatApp) -> AsyncIterator[Agent]:
        key = load_config(home).api_key
        client = async_client(fake.app)
        provider = AnthropicProvider(
            key.reveal() if key else None, IN_PROCESS_URL, http_client=client
        )
        try:
            workdir = home.parent / "work"  # not in the home, which the tools keep out of
            workdir.mkdir(exist_ok=True)
            async with Agent.open(home, asker=app, provider=provider, workdir=workdir) as agent:
                yield agent
        finally:
            await provider.aclose()

    return open_agent


@asynccontextmanager
async def running(
    home: Path,
    fake: AnthropicFake,
    *,
    editor: Callable[[Path], None] | None = None,
    size: tuple[int, int] = SIZE,
) -> AsyncIterator[Pilot[int]]:
    """The app on an open agent, driven by a Pilot; everything closed at the end."""
    app = ChatApp(home, editor=editor)
    async with hosting(app, fake_opener(home, fake)), app.run_test(size=size) as pilot:
        await pilot.pause()
        yield pilot


async def wait_until(
    pilot: Pilot[Any], ready: Callable[[], object], *, timeout: float = 10, what: str = ""
) -> None:
    """Let the app run until `ready()` holds."""
    with anyio.fail_after(timeout):
        while not ready():
            await pilot.pause(0.02)
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
