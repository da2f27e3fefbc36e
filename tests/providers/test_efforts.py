"""Every reasoning effort the config accepts makes a request both APIs take (through the real
SDKs, against the fakes), with the thinking fields each effort stands for."""

from __future__ import annotations

from typing import Any, get_args, get_type_hints

import pytest
from anthropic.types import OutputConfigParam
from openai.types.shared import ReasoningEffort

from evertalk.config import EFFORTS
from evertalk.providers.anthropic import MIN_THINKING_BUDGET, AnthropicProvider
from evertalk.providers.base import ProviderError, Request, collect
from evertalk.providers.layout import compaction_request
from evertalk.providers.openai import OpenAIProvider
from fakes import IN_PROCESS_URL, AnthropicFake, OpenAIFake, async_client, chat

pytestmark = pytest.mark.anyio

MANUAL_MODEL = "claude-haiku-4-5"  # extended thinking with budget_tokens only
ADAPTIVE_MODEL = "claude-haiku-5-5"  # adaptive thinking only: budget_tokens is a 400
MAX_TOKENS = 2000

MANUAL_BUDGETS: dict[str, int | None] = {
    "none": None,
    "minimal": MIN_THINKING_BUDGET,
    "low": 2048,
    "medium": 8192,
    "high": 16384,
    "xhigh": 32768,
    "max": 32768,
}
# effort → (thinking type, output_config.effort)
ADAPTIVE: dict[str, tuple[str | None, str]] = {
    "none": (None, "low"),
    "minimal": ("adaptive", "low"),
    "low": ("adaptive", "low"),
    "medium": ("adaptive", "medium"),
    "high": ("adaptive", "high"),
    "xhigh": ("adaptive", "xhigh"),
    "max": ("adaptive", "max"),
}
ANTHROPIC_EFFORTS = get_args(get_args(get_type_hints(OutputConfigParam)["effort"])[0])
OPENAI_EFFORTS = get_args(get_args(ReasoningEffort)[0])


def request(model: str, effort: str | None) -> Request:
    context = "<chat>\n0+1|user: hi\n</chat>"
    return compaction_request(model, "S", [], context, "Compaction: x", [], MAX_TOKENS, effort)


def thinking_problem(body: dict[str, Any], adaptive: bool) -> str | None:
    """What the Messages API would refuse in the thinking fields (the fakes do not check them)."""
    thinking = body.get("thinking")
    effort = body.get("output_config", {}).get("effort")
    if effort is not None and (not adaptive or effort not in ANTHROPIC_EFFORTS):
        return f"output_config.effort {effort!r}"
    if thinking is None:
        return None
    if thinking["type"] == "enabled":
        budget = thinking["budget_tokens"]
        if adaptive or not MIN_THINKING_BUDGET <= budget < body["max_tokens"]:
            return f"budget_tokens {budget}"
        return None
    return None if adaptive and thinking["type"] == "adaptive" else f"thinking {thinking}"


async def anthropic_body(model: str, effort: str) -> dict[str, Any]:
    fake = AnthropicFake(chat("a line"))
    provider = AnthropicProvider("k", IN_PROCESS_URL, http_client=async_client(fake.app))
    finished = await collect(provider, request(model, effort))
    await provider.aclose()
    assert finished.text == "a line"
    (record,) = fake.records
    assert record.status == 200 and record.body is not None
    return record.body


def test_the_tables_cover_every_config_effort() -> None:
    assert set(MANUAL_BUDGETS) == set(ADAPTIVE) == set(EFFORTS)


@pytest.mark.parametrize("effort", EFFORTS)
async def test_every_effort_on_a_manual_thinking_model(effort: str) -> None:
    body = await anthropic_body(MANUAL_MODEL, effort)
    assert thinking_problem(body, adaptive=False) is None
    budget = MANUAL_BUDGETS[effort]
    if budget is None:  # none: no thinking at all
        assert "thinking" not in body and body["max_tokens"] == MAX_TOKENS
    else:
        assert body["thinking"] == {"type": "enabled", "budget_tokens": budget}
        assert body["max_tokens"] == MAX_TOKENS + budget
    assert "output_config" not in body


@pytest.mark.parametrize("effort", EFFORTS)
async def test_every_effort_on_an_adaptive_model(effort: str) -> None:
    body = await anthropic_body(ADAPTIVE_MODEL, effort)
    assert thinking_problem(body, adaptive=True) is None
    kind, level = ADAPTIVE[effort]
    assert body.get("thinking", {}).get("type") == kind
    assert body["output_config"] == {"effort": level}
    assert body["max_tokens"] == MAX_TOKENS


async def test_an_unknown_effort_is_refused_before_any_call() -> None:
    fake = AnthropicFake(chat("a line"))
    provider = AnthropicProvider("k", IN_PROCESS_URL, http_client=async_client(fake.app))
    for model in (MANUAL_MODEL, ADAPTIVE_MODEL):
        with pytest.raises(ProviderError) as info:
            await collect(provider, request(model, "extreme"))
        assert info.value.kind == "bad_request"
    await provider.aclose()
    assert fake.records == []


@pytest.mark.parametrize("effort", EFFORTS)
async def test_every_effort_goes_to_openai_as_its_reasoning_effort(effort: str) -> None:
    fake = OpenAIFake(chat("a line"))
    provider = OpenAIProvider("k", f"{IN_PROCESS_URL}/v1", http_client=async_client(fake.app))
    finished = await collect(provider, request("gpt-5.6-luna", effort))
    await provider.aclose()
    assert finished.text == "a line"
    (record,) = fake.records
    assert record.status == 200 and record.body is not None
    assert record.body["reasoning_effort"] == effort
    assert effort in OPENAI_EFFORTS  # a value of the API's own enum


async def test_no_effort_leaves_thinking_to_the_model() -> None:
    fake = AnthropicFake(chat("a line"))
    provider = AnthropicProvider("k", IN_PROCESS_URL, http_client=async_client(fake.app))
    await collect(provider, request(ADAPTIVE_MODEL, None))
    await provider.aclose()
    body = fake.records[0].body
    assert body is not None and "thinking" not in body and "output_config" not in body
