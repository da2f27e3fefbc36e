"""The first turns of a new chat read the tools and system prompt from the cache (SPEC §7).

Their views are too short for the 20- and 40-back marks, and their view blocks change from turn
to turn; the spare mark on the system prompt is what lets them read anything. Real tools and
system prompt, the real Anthropic adapter, the fake's cache model at its default 1,024-token
minimum."""

from __future__ import annotations

import pytest

from evertalk.prompts import TOOLS, system_text
from evertalk.providers.anthropic import AnthropicProvider
from evertalk.providers.base import Text, Usage, collect
from evertalk.providers.layout import turn_request
from fakes import IN_PROCESS_URL, AnthropicFake, FakeClock, async_client, chat
from fakes.common import canonical, tokens_of

pytestmark = pytest.mark.anyio

MODEL = "claude-sonnet-5-5"
SYSTEM = system_text("")


def rendered(lines: int) -> str:
    return "\n".join(
        ["<chat>", *(f"{i}+1|user: hello number {i}" for i in range(lines)), "</chat>"]
    )


def prefix_tokens() -> int:
    """The tools and the system prompt in the fake's tokens, tool by tool as its cache counts."""
    tools = [
        {"name": t.name, "description": t.description, "input_schema": t.input_schema}
        for t in TOOLS
    ]
    return sum(tokens_of(canonical(tool)) for tool in tools) + tokens_of(SYSTEM)


async def turn(provider: AnthropicProvider, lines: int, message: str) -> Usage:
    request = turn_request(MODEL, SYSTEM, TOOLS, rendered(lines), [Text(message)], [], 500)
    return (await collect(provider, request)).usage


def test_the_tools_and_system_prompt_are_long_enough_to_cache() -> None:
    # below the minimum a marked prefix writes nothing, and the mark would be wasted
    assert prefix_tokens() > 1024


async def test_the_second_and_third_turns_read_the_tools_and_system_prompt() -> None:
    fake = AnthropicFake(chat("Hello."), clock=FakeClock())
    provider = AnthropicProvider("test-key", IN_PROCESS_URL, http_client=async_client(fake.app))
    try:
        # a new chat: an empty view, then views whose only whole blocks are new each time
        first = await turn(provider, 0, "hi")
        second = await turn(provider, 2, "and now?")
        third = await turn(provider, 5, "again")
    finally:
        await provider.aclose()
    assert first.cache_read == 0
    assert first.cache_write >= prefix_tokens()
    assert second.cache_read == prefix_tokens()
    assert third.cache_read == prefix_tokens()
