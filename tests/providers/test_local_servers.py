"""Local OpenAI-compatible servers (llama.cpp, llama-cpp-python, Ollama, vLLM) through the real
adapter: `make_provider` as evertalk makes it, the official openai SDK, real HTTP (in-process and
over loopback) to the fake server taught each of their ways: a stream interrupted by a newer
request, an empty 200 on overflow, a 500 for a null content, no usage in streams."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from starlette.types import ASGIApp

from evertalk.ledger import Ledger, read_records, summarize
from evertalk.providers.base import (
    Event,
    Finished,
    Message,
    Provider,
    ProviderError,
    Request,
    Text,
    TextDelta,
    Tool,
    ToolResult,
    ToolUse,
    collect,
)
from evertalk.providers.factory import make_provider
from evertalk.providers.retry import RetryPolicy
from evertalk.usage_cli import format_summary
from fakes import (
    IN_PROCESS_URL,
    Call,
    OpenAIFake,
    Script,
    SwitchApp,
    ToolCall,
    async_client,
    chat,
    fail,
    interrupted_by_next,
    refuses_null_content,
    reply,
    slow,
    without_stream_usage,
)
from fakes.behaviours import Outcome

pytestmark = pytest.mark.anyio

LOCAL_KINDS = ("llamacpp", "ollama", "vllm")
ONCE = RetryPolicy(tries=1)  # these tests look at one try; test_retry.py covers the policy
QUICK = RetryPolicy(tries=3, base_delay=0.0)
KEY = "sk-test-key-for-a-local-server-1234"
ZOOM = Tool("zoom", "Open a line.", {"type": "object", "properties": {"id": {"type": "integer"}}})


@pytest.fixture(params=["in-process", "loopback"])
def connect(request: pytest.FixtureRequest) -> Iterator[Any]:
    """`connect(fake, kind, retry)`: a provider of `kind` as `make_provider` makes it, talking
    to the fake in-process or over a loopback socket."""
    switch: SwitchApp | None = None

    def make(fake: ASGIApp, kind: str, retry: RetryPolicy = ONCE) -> Provider:
        nonlocal switch
        if request.param == "in-process":
            url = f"{IN_PROCESS_URL}/v1"
            return make_provider(kind, KEY, url, async_client(fake), retry=retry)
        switch, address = request.getfixturevalue("loopback")
        switch.current = fake
        return make_provider(kind, KEY, f"{address}/v1", retry=retry)

    yield make
    if switch is not None:
        switch.current = None


def ask(text: str, steps: list[Message] | None = None) -> Request:
    messages = [Message("user", [Text(text)]), *(steps or [])]
    return Request("smollm2", [Text("You are Ever.")], [ZOOM], messages, max_tokens=200)


# --- (1) a reply the server cut short ---------------------------------------------------------


async def test_a_stream_a_newer_request_interrupts_is_said_for_what_it_is(connect: Any) -> None:
    """A llama-cpp-python server ends the stream in flight with [DONE] and no finish reason when
    another request comes: an error that says so and names the settings that prevent it."""
    paced = interrupted_by_next(slow(0, chat("word " * 300), chunk_delay=0.005))
    script = Script(chat("the second reply")).route(lambda call: call.index == 0, paced)
    fake = OpenAIFake(script, text_chunk=5)
    provider = connect(fake, "llamacpp")
    seen: list[Event] = []
    second: list[Finished] = []

    async def ask_again() -> None:
        second.append(await collect(provider, ask("another question")))

    async with anyio.create_task_group() as group:
        with pytest.raises(ProviderError) as info:
            async for event in provider.stream(ask("a long answer, please")):
                seen.append(event)
                if isinstance(event, TextDelta) and len(seen) == 2:
                    group.start_soon(ask_again)
    await provider.aclose()
    error = info.value
    assert error.kind == "cut"
    assert str(error).startswith(
        "the server cut the reply short: another request interrupted it, "
        "or the prompt exceeded its context"
    )
    for option in ("--parallel", "-np", "--ctx-size", "-c", "--n_ctx", "--interrupt_requests"):
        assert option in str(error)
    assert "\n" not in str(error)
    assert second[0].text == "the second reply"
    assert fake.records[0].interrupted and not fake.records[1].interrupted


@pytest.mark.parametrize(
    ("kind", "named"),
    [
        ("llamacpp", "--ctx-size"),
        ("ollama", "OLLAMA_CONTEXT_LENGTH"),
        ("vllm", "--max-model-len"),
        ("openai", "a larger context"),
    ],
)
async def test_an_empty_200_on_overflow_is_said_for_what_it_is(
    connect: Any, kind: str, named: str
) -> None:
    fake = OpenAIFake(chat("never sent"), context_window=30, overflow="empty")
    provider = connect(fake, kind)
    with pytest.raises(ProviderError) as info:
        await collect(provider, ask("a question far too long for the window " * 10))
    await provider.aclose()
    assert info.value.kind == "cut" and info.value.usage is None
    assert "the prompt exceeded its context" in str(info.value) and named in str(info.value)
    assert len(fake.records) == 1 and not fake.records[0].started


# --- (4) tool calls, validation errors, the SDK's retries -----------------------------------


def tool_only(call: Call) -> Outcome:
    """A model that calls a tool without a word, then answers once it has the result."""
    if call.after_tool_result:
        return reply("It says hello.")
    return reply(ToolCall("zoom", {"id": 3}, id="call_local_1"))


async def tool_round_trip(provider: Provider) -> Finished:
    first = await collect(provider, ask("zoom into line 3"))
    assert first.parts == [ToolUse("call_local_1", "zoom", {"id": 3})]
    steps = [
        Message("assistant", first.parts),
        Message("user", [ToolResult("call_local_1", [Text("3+1|user: hello")])]),
    ]
    return await collect(provider, ask("zoom into line 3", steps))


@pytest.mark.parametrize("kind", LOCAL_KINDS)
async def test_a_tool_only_message_goes_to_local_servers_with_empty_content(
    connect: Any, kind: str
) -> None:
    fake = OpenAIFake(refuses_null_content(tool_only))
    provider = connect(fake, kind, QUICK)
    done = await tool_round_trip(provider)
    await provider.aclose()
    assert done.text == "It says hello."
    assert [record.status for record in fake.records] == [200, 200]
    body = fake.records[1].body
    assert body is not None
    sent = body["messages"][2]
    assert sent["role"] == "assistant" and sent["content"] == ""
    assert sent["tool_calls"][0]["id"] == "call_local_1"


async def test_openai_itself_still_gets_null_content(connect: Any) -> None:
    """The bytes OpenAI's prompt cache has seen stay as they were."""
    fake = OpenAIFake(tool_only)
    provider = connect(fake, "openai")
    await tool_round_trip(provider)
    await provider.aclose()
    body = fake.records[1].body
    assert body is not None and body["messages"][2]["content"] is None


async def test_a_500_validation_error_is_not_tried_again(connect: Any) -> None:
    """Such a 500 is the server refusing the request: every try would meet it (the SDK's own
    retries and evertalk's used to send it 4 and 3 times)."""
    fake = OpenAIFake(refuses_null_content(tool_only))
    provider = connect(fake, "openai", QUICK)  # a server evertalk does not know to be local
    with pytest.raises(ProviderError) as info:
        await tool_round_trip(provider)
    await provider.aclose()
    error = info.value
    assert (error.kind, error.status, error.transient) == ("bad_request", 500, False)
    assert "validation error" in str(error) and "\n" not in str(error)
    assert KEY not in str(error)
    assert [record.status for record in fake.records] == [200, 500]


@pytest.mark.parametrize("kind", ["openai", *LOCAL_KINDS])
async def test_a_plain_500_is_tried_by_evertalks_policy_alone(connect: Any, kind: str) -> None:
    fake = OpenAIFake(fail(500, retry_after_ms=None))
    provider = connect(fake, kind, QUICK)
    with pytest.raises(ProviderError) as info:
        await collect(provider, ask("hi"))
    await provider.aclose()
    assert (info.value.kind, info.value.status) == ("server", 500)
    assert len(fake.records) == QUICK.tries  # no SDK retries hidden inside each try


# --- (6) usage a server does not report --------------------------------------------------------


async def test_a_stream_without_usage_is_not_zero_in_the_ledger(
    connect: Any, tmp_path: Path
) -> None:
    fake = OpenAIFake(without_stream_usage(chat("hello")))
    provider = connect(fake, "llamacpp")
    finished = await collect(provider, ask("hi"))
    await provider.aclose()
    assert finished.text == "hello" and not finished.usage.reported
    path = tmp_path / "usage.jsonl"
    with Ledger(path) as ledger:
        ledger.record(
            role="turn",
            provider=provider.name,
            model="smollm2",
            usage=finished.usage,
            cost=None,
            duration_ms=12,
        )
    assert json.loads(path.read_text())["reported"] is False
    summary = summarize(read_records(path).records)
    assert summary.total.unreported == 1
    printed = format_summary(summary)
    assert "of 0 prompt tokens" not in printed
    assert "1 of 1 calls" in printed


async def test_llamacpp_timings_stand_in_for_the_usage(connect: Any) -> None:
    """llama.cpp's server sends its own counts (`timings`) where it sends no usage."""
    fake = OpenAIFake(without_stream_usage(chat("hello"), timings=True))
    provider = connect(fake, "llamacpp")
    finished = await collect(provider, ask("hi"))
    await provider.aclose()
    record = fake.records[0]
    assert finished.usage.reported
    assert (finished.usage.input, finished.usage.cache_read, finished.usage.output) == (
        record.input_tokens,
        record.cache_read,
        record.output_tokens,
    )
    assert finished.usage.input > 0 and finished.usage.output > 0
