"""Shared pieces of the turn, session, subagent and headless tests (no tests of its own).

A home folder with a config pointing at a fake, an agent on the real Anthropic SDK talking to the
in-process fake, routes that tell compactions from turns, and readers of the log.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import anyio

from evertalk.agent.images import ImageStore
from evertalk.agent.permissions import Asker
from evertalk.agent.policy import Policy
from evertalk.agent.session import Agent
from evertalk.agent.tools import Toolbox, ToolContext
from evertalk.agent.turn import Limits, MessageLog, TurnLoop
from evertalk.chat import Chat
from evertalk.config import ToolPolicies
from evertalk.prompts import TOOLS
from evertalk.protocol.events import AgentEvent, TurnEnded
from evertalk.providers.base import Provider
from fakes import AnthropicFake, Call, OpenAIFake, Script, summarizer
from fakes.sdk_providers import provider_for as provider_for

# the names other tests import from here, defined once for every folder
from home_config import API_KEY as API_KEY
from home_config import MEMORY_MODEL as MEMORY_MODEL
from home_config import MODEL as MODEL
from home_config import write_config as write_config


def is_compaction(call: Call) -> bool:
    return call.body.get("tool_choice") in ({"type": "none"}, "none")


def is_turn(call: Call) -> bool:
    return not is_compaction(call)


def script(summary: Any = None) -> Script:
    """A script whose compactions get `summary` (default: a 100-byte summarizer); turns are
    scripted with `push` or routes by the test."""
    return Script().route(is_compaction, summary if summary is not None else summarizer(100))


def fixed_clock(moment: datetime) -> Callable[[], datetime]:
    return lambda: moment


DAY_ONE = datetime(2026, 10, 8, 14, 3, 22, tzinfo=timezone(timedelta(hours=2)))


def workdir_beside(home: Path) -> Path:
    """A test session's working directory: beside its home, not in it (commands cannot see
    evertalk's home, and the file tools keep out of it)."""
    work = home.parent / "work"
    work.mkdir(parents=True, exist_ok=True)
    return work


@asynccontextmanager
async def opened(
    home: Path,
    fake: AnthropicFake | OpenAIFake,
    *,
    asker: Asker | None = None,
    granted: Iterable[str] = (),
    clock: Callable[[], datetime] | None = None,
    limits: Limits | None = None,
    workdir: Path | None = None,
) -> AsyncIterator[Agent]:
    provider = provider_for(fake)
    try:
        async with Agent.open(
            home,
            asker=asker,
            granted=granted,
            provider=provider,
            workdir=workdir or workdir_beside(home),
            clock=clock or fixed_clock(DAY_ONE),
            limits=limits,
        ) as agent:
            yield agent
    finally:
        await provider.aclose()


async def collect_turn(
    agent: Agent,
    *,
    turns: int = 1,
    on: Callable[[AgentEvent], None] | None = None,
    timeout: float = 15,
) -> list[AgentEvent]:
    """Events until `turns` turns have ended."""
    seen: list[AgentEvent] = []
    with anyio.fail_after(timeout):
        async for event in agent.events():
            seen.append(event)
            if on is not None:
                on(event)
            if isinstance(event, TurnEnded):
                turns -= 1
                if turns == 0:
                    break
    return seen


def log_of(home: Path) -> list[tuple[str, str]]:
    """(kind, text) of every message of the chat, oldest first."""
    with Chat.open(home / "chat", readonly=True) as chat:
        return [
            (record.kind, record.text)
            for record in (chat.store.read_message(i) for i in range(chat.t))
        ]


def records_of(home: Path) -> list[dict[str, Any]]:
    """The raw records of the main log, in file order (every day file)."""
    out: list[dict[str, Any]] = []
    for path in sorted((home / "chat" / "main").glob("*.jsonl")):
        for line in path.read_text().splitlines():
            if line.strip().startswith("{"):
                out.append(json.loads(line))
    return out


def turn_bodies(fake: AnthropicFake | OpenAIFake) -> list[dict[str, Any]]:
    """The bodies of the turn requests the fake answered, in order (compactions left out)."""
    return [
        r.body
        for r in fake.records
        if r.body is not None and r.body.get("tool_choice") not in ({"type": "none"}, "none")
    ]


def texts(content: list[dict[str, Any]]) -> list[str]:
    return [block["text"] for block in content if block.get("type") == "text"]


def user_texts(body: dict[str, Any]) -> str:
    """All the text of the first user message (view blocks and tail), joined."""
    return "".join(texts(body["messages"][0]["content"]))


def bare_loop(provider: Provider, log: MessageLog, ctx: ToolContext, images: Path) -> TurnLoop:
    """A TurnLoop outside any session: default tool policies, no asker, no ledger."""
    return TurnLoop(
        provider=provider,
        model=MODEL,
        effort=None,
        system="You are Ever.",
        tools=TOOLS,
        toolbox=Toolbox(Policy(ToolPolicies()), None),
        context=ctx,
        log=log,
        images=ImageStore(images),
    )
