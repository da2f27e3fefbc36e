"""The errors' own words: a wrong address or model names the server (never its credentials),
and a server nothing listens on is a connection error that says where it looked."""

from __future__ import annotations

import email.utils

import pytest

from evertalk.providers.anthropic import AnthropicProvider
from evertalk.providers.base import Message, ProviderError, Request, Text, collect
from evertalk.providers.errors import (
    MESSAGE_LIMIT,
    address,
    at_address,
    clean,
    cut_by_server,
    is_validation_error,
    retry_after_seconds,
    should_retry,
)
from evertalk.providers.openai import OpenAIProvider

pytestmark = pytest.mark.anyio

NOWHERE = "http://user:pass@127.0.0.1:9/v1?token=abc"  # the discard port: nothing listens


def test_an_address_keeps_no_credentials() -> None:
    assert address(NOWHERE) == "http://127.0.0.1:9/v1"
    assert address("https://api.anthropic.com") == "https://api.anthropic.com"
    assert at_address("not_found", "Anthropic: Not Found", NOWHERE).endswith(
        "(at http://127.0.0.1:9/v1)"
    )
    assert at_address("overloaded", "Anthropic: Overloaded", NOWHERE) == "Anthropic: Overloaded"


def request() -> Request:
    return Request("some-model", [Text("system")], [], [Message("user", [Text("hi")])], 100)


async def test_nothing_listening_says_where_it_looked() -> None:
    for provider in (
        AnthropicProvider("sk-ant-test-key-1234567", NOWHERE, max_retries=0, timeout=5),
        OpenAIProvider("sk-test-key-1234567", NOWHERE, max_retries=0, timeout=5),
    ):
        with pytest.raises(ProviderError) as raised:
            await collect(provider, request())
        await provider.aclose()
        assert raised.value.kind == "connection"
        assert str(raised.value).endswith("could not connect (at http://127.0.0.1:9/v1)")
        assert "pass" not in str(raised.value) and "token" not in str(raised.value)


def test_how_long_the_server_asked_to_wait() -> None:
    now = 1_800_000_000.0
    assert retry_after_seconds({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert retry_after_seconds({"retry-after": "2"}) == 2.0
    date = email.utils.formatdate(now + 30, usegmt=True)
    assert retry_after_seconds({"retry-after": date}, now=lambda: now) == 30.0
    past = email.utils.formatdate(now - 30, usegmt=True)
    assert retry_after_seconds({"retry-after": past}, now=lambda: now) == 0.0
    for nonsense in ({}, {"retry-after": "soon"}, {"retry-after-ms": "-5"}, {"retry-after": "nan"}):
        assert retry_after_seconds(nonsense) is None
    assert should_retry({"x-should-retry": "false"}) is False
    assert should_retry({"x-should-retry": "true"}) is True
    assert should_retry({}) is None


def test_a_placeholder_key_leaves_an_address_as_it_is() -> None:
    assert clean("could not connect (at http://localhost:11434/v1)", ["local"]) == (
        "could not connect (at http://localhost:11434/v1)"
    )
    assert clean("bad key sk-some-real-key-1", ["sk-some-real-key-1"]) == "bad key [redacted]"


@pytest.mark.parametrize(
    ("status", "message", "expected"),
    [
        (500, "1 validation error for ChatCompletionRequestAssistantMessage", True),
        (500, "3 Validation Errors for CreateChatCompletionRequest", True),
        (500, "pydantic_core._pydantic_core.ValidationError: content", True),
        (500, "The server had an error while processing your request.", False),
        (503, "The engine is currently overloaded", False),
        (400, "1 validation error for X", False),  # a 400 is never retried anyway
    ],
)
def test_a_validation_error_is_told_from_a_failing_server(
    status: int, message: str, expected: bool
) -> None:
    assert is_validation_error(status, message) is expected


@pytest.mark.parametrize(
    ("kind", "named"),
    [
        ("llamacpp", ["--parallel", "-np", "--ctx-size", "-c", "--interrupt_requests", "--n_ctx"]),
        ("ollama", ["OLLAMA_NUM_PARALLEL", "OLLAMA_CONTEXT_LENGTH"]),
        ("vllm", ["--max-model-len"]),
        ("openai", ["more requests at once", "a larger context"]),
    ],
)
def test_a_reply_cut_short_names_what_prevents_it(kind: str, named: list[str]) -> None:
    line = cut_by_server(kind)
    assert line.startswith(
        "the server cut the reply short: another request interrupted it, "
        "or the prompt exceeded its context; "
    )
    assert all(option in line for option in named)
    assert "\n" not in line and len(line) <= MESSAGE_LIMIT and clean(line, []) == line
