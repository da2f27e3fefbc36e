"""The errors' own words: a wrong address or model names the server (never its credentials),
and a server nothing listens on is a connection error that says where it looked."""

from __future__ import annotations

import pytest

from evertalk.providers.anthropic import AnthropicProvider
from evertalk.providers.base import Message, ProviderError, Request, Text, collect
from evertalk.providers.errors import address, at_address
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
