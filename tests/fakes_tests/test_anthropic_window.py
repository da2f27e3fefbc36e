"""The Anthropic fake's context window: off by default; when set, a prompt over it gets the 400
the real API gives ("prompt is too long"), in the fake's own tokens, and nothing else happens."""

from __future__ import annotations

from typing import Any

import anthropic
import pytest

from fakes import AnthropicFake, anthropic_async, summarizer
from fakes.anthropic_fake import prompt_blocks

pytestmark = pytest.mark.anyio

SYSTEM = "You are Ever."


def prompt_of(text: str) -> dict[str, Any]:
    return {"system": SYSTEM, "messages": [{"role": "user", "content": text}]}


async def create(fake: AnthropicFake, prompt: dict[str, Any]) -> anthropic.types.Message:
    client = anthropic_async(fake, max_retries=0)
    try:
        return await client.messages.create(model="m", max_tokens=50, **prompt)
    finally:
        await client.close()


def tokens(prompt: dict[str, Any]) -> int:
    return sum(block.tokens for block in prompt_blocks({"model": "m", **prompt}))


async def test_a_prompt_over_the_window_is_refused_and_one_at_it_is_answered() -> None:
    fake = AnthropicFake(summarizer(40), context_window=1_000)
    at_window = prompt_of("x" * (4 * (1_000 - tokens(prompt_of("")))))
    assert tokens(at_window) == 1_000
    await create(fake, at_window)
    over = prompt_of("x" * (4 * (1_000 - tokens(prompt_of(""))) + 1))
    with pytest.raises(anthropic.BadRequestError) as raised:
        await create(fake, over)
    assert raised.value.status_code == 400
    assert isinstance(raised.value.body, dict)
    assert raised.value.body["error"] == {
        "type": "invalid_request_error",
        "message": "prompt is too long: 1001 tokens > 1000 maximum",
    }
    answered, refused = fake.records
    assert (answered.status, answered.input_tokens) == (200, 1_000)
    assert (refused.status, refused.error_type) == (400, "invalid_request_error")
    assert refused.input_tokens == 0 and not refused.started
    assert fake.totals.requests == 1  # a refused request is not answered


async def test_no_window_by_default() -> None:
    fake = AnthropicFake(summarizer(40))
    await create(fake, prompt_of("x" * 2_000_000))  # 500,000 tokens
    assert fake.records[0].status == 200
