"""One mapping of the SDKs' exceptions to our errors serves both adapters: the same failure of
the server, through the real Anthropic and OpenAI SDKs against the fakes, becomes the same
error (kind, status, whether another try may help, how long to wait), its words differing
only in the vendor's name and the address."""

from __future__ import annotations

from collections.abc import Callable

import pytest

from evertalk.providers.anthropic import AnthropicProvider
from evertalk.providers.base import Message, Provider, ProviderError, Request, Text, collect
from evertalk.providers.openai import OpenAIProvider
from evertalk.providers.sdk_errors import SdkErrors
from fakes import IN_PROCESS_URL, AnthropicFake, Fail, OpenAIFake, async_client, chat
from fakes.behaviours import Behaviour, cut_in_text, dropped

pytestmark = pytest.mark.anyio

KEY = "sk-ant-test-MAPPING-0123456789"
NOWHERE = "http://127.0.0.1:9"  # the discard port: nothing listens


def anthropic(behaviour: Behaviour, timeout: float = 600) -> Provider:
    client = async_client(AnthropicFake(behaviour).app)
    return AnthropicProvider(KEY, IN_PROCESS_URL, http_client=client, timeout=timeout)


def openai(behaviour: Behaviour, timeout: float = 600) -> Provider:
    client = async_client(OpenAIFake(behaviour).app)
    return OpenAIProvider(KEY, f"{IN_PROCESS_URL}/v1", http_client=client, timeout=timeout)


async def failure(provider: Provider) -> ProviderError:
    request = Request("some-model", [Text("S")], [], [Message("user", [Text("hi")])], 50)
    try:
        with pytest.raises(ProviderError) as raised:
            await collect(provider, request)
    finally:
        await provider.aclose()
    return raised.value


def seen(error: ProviderError, vendor: str) -> tuple[object, ...]:
    """What the caller sees of an error, the vendor's name and the fakes' addresses aside."""
    words = str(error).replace(vendor, "<vendor>").replace(f"{IN_PROCESS_URL}/v1", "<fake>")
    words = words.replace(IN_PROCESS_URL, "<fake>").replace(f"{NOWHERE}/v1", NOWHERE)
    return error.kind, error.status, error.transient, error.retry_after, words


def fails(status: int, message: str) -> Behaviour:
    def behave(_call: object) -> Fail:
        return Fail(status, message=message, retry_after_ms=2500)

    return behave


async def both(make: Callable[[Callable[..., Provider]], Provider]) -> list[tuple[object, ...]]:
    return [
        seen(await failure(make(anthropic)), "Anthropic"),
        seen(await failure(make(openai)), "OpenAI"),
    ]


@pytest.mark.parametrize(
    ("status", "kind", "transient"),
    [
        (400, "bad_request", False),
        (401, "auth", False),
        (403, "auth", False),
        (404, "not_found", False),
        (429, "rate_limit", True),
        (500, "server", True),
        (529, "overloaded", True),
    ],
)
async def test_a_status_error_maps_alike_through_both_sdks(
    status: int, kind: str, transient: bool
) -> None:
    first, second = await both(lambda make: make(fails(status, "the moon is in the way")))
    assert first == second
    assert first[:4] == (kind, status, transient, 2.5)
    assert str(first[4]).startswith("<vendor>: the moon is in the way")


async def test_a_refused_request_in_a_server_error_is_not_tried_again_for_either() -> None:
    why = "1 validation error for ChatCompletionRequest: messages.0.content: field required"
    first, second = await both(lambda make: make(fails(500, why)))
    assert first == second
    assert first[:3] == ("bad_request", 500, False)
    assert first[4] == f"<vendor>: the server refused the request as invalid: {why}"


@pytest.mark.parametrize(
    ("fault", "words"),
    [
        (cut_in_text, "<vendor>: the reply stream broke off"),
        (dropped, "<vendor>: the reply stream broke off"),
    ],
)
async def test_a_stream_that_breaks_off_maps_alike(
    fault: Callable[..., object], words: str
) -> None:
    def behaviour(call: object) -> object:
        return fault(call, chat("a reply long enough to break off in the middle"))

    first, second = await both(lambda make: make(behaviour))
    # the words end with the exception the SDK raised, which each SDK wraps its own way
    assert first[:4] == second[:4] == ("cut", None, True, None)
    assert str(first[4]).startswith(words) and str(second[4]).startswith(words)


async def test_a_server_nothing_listens_on_maps_alike() -> None:
    made: list[Provider] = [
        AnthropicProvider(KEY, NOWHERE, timeout=5),
        OpenAIProvider(KEY, f"{NOWHERE}/v1", timeout=5),
    ]
    first = seen(await failure(made[0]), "Anthropic")
    second = seen(await failure(made[1]), "OpenAI")
    assert first == second
    assert first == ("connection", None, False, None, f"<vendor>: could not connect (at {NOWHERE})")


def test_each_adapter_names_its_vendor_in_one_shared_table() -> None:
    tables = [AnthropicProvider.errors, OpenAIProvider.errors]
    assert all(isinstance(table, SdkErrors) for table in tables)
    assert [table.vendor for table in tables] == ["Anthropic", "OpenAI"]
