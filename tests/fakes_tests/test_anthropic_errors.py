"""The Anthropic fake's 400s, error replies, retries, and cut streams, as the real SDK sees them."""

from __future__ import annotations

from typing import Any

import anthropic
import httpx2
import pytest

from fakes import AnthropicFake, anthropic_async, chat, cut, fail, raw_client

from .conftest import Expose

pytestmark = pytest.mark.anyio

USER: Any = {"role": "user", "content": "hi"}
ASSISTANT: Any = {"role": "assistant", "content": "hello"}
MARK = {"type": "ephemeral"}


def marked(text: str) -> dict[str, Any]:
    return {"type": "text", "text": text, "cache_control": MARK}


def tool_use(tool_id: str) -> dict[str, Any]:
    return {"type": "tool_use", "id": tool_id, "name": "zoom", "input": {"line": "0+2"}}


def tool_result(tool_id: str) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": tool_id, "content": "two lines"}


async def create(target: Any, **params: Any) -> anthropic.types.Message:
    client = anthropic_async(target, max_retries=params.pop("max_retries", 0))
    try:
        return await client.messages.create(model="m", max_tokens=50, **params)
    finally:
        await client.close()


async def test_five_cache_marks_are_a_bad_request_and_four_are_fine(expose: Expose) -> None:
    target = expose(AnthropicFake())
    tools: Any = [{"name": "zoom", "input_schema": {"type": "object"}, "cache_control": MARK}]
    system: Any = [marked("You are Ever.")]
    four: Any = [{"role": "user", "content": [marked("a"), marked("b")]}]
    await create(target, tools=tools, system=system, messages=four)
    five: Any = [{"role": "user", "content": [marked("a"), marked("b"), marked("c")]}]
    with pytest.raises(anthropic.BadRequestError) as raised:
        await create(target, tools=tools, system=system, messages=five)
    assert raised.value.status_code == 400
    assert isinstance(raised.value.body, dict)
    assert raised.value.body["error"] == {
        "type": "invalid_request_error",
        "message": "A maximum of 4 blocks with cache_control may be provided. Found 5.",
    }


async def test_tool_use_and_tool_result_must_pair_up(expose: Expose) -> None:
    target = expose(AnthropicFake())
    used: Any = {"role": "assistant", "content": [{"type": "text", "text": "x"}, tool_use("t1")]}
    good = [USER, used, {"role": "user", "content": [tool_result("t1")]}]
    await create(target, messages=good)
    unanswered = [USER, used, {"role": "user", "content": "and?"}]
    with pytest.raises(anthropic.BadRequestError, match="without `tool_result` blocks"):
        await create(target, messages=unanswered)
    stray = [
        USER,
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": [tool_result("t9")]},
    ]
    with pytest.raises(anthropic.BadRequestError, match="unexpected `tool_use_id`"):
        await create(target, messages=stray)
    text_first = [USER, used, {"role": "user", "content": [marked("see:"), tool_result("t1")]}]
    with pytest.raises(anthropic.BadRequestError, match="without `tool_result` blocks"):
        await create(target, messages=text_first)  # results must open the message
    late = [USER, used, {"role": "user", "content": "wait"}, {"role": "assistant", "content": "ok"}]
    late.append({"role": "user", "content": [tool_result("t1")]})
    with pytest.raises(anthropic.BadRequestError):
        await create(target, messages=late)


@pytest.mark.parametrize(
    ("messages", "words"),
    [
        ([{"role": "assistant", "content": "hi"}, USER], "first message"),
        ([USER, USER], "roles must alternate"),
        (
            [USER, {"role": "assistant", "content": "a"}, {"role": "assistant", "content": "b"}],
            "alternate",
        ),
        ([{"role": "user", "content": [{"type": "text", "text": ""}]}], "non-empty"),
        ([], "at least one message"),
    ],
)
async def test_bad_conversations_are_rejected(messages: Any, words: str) -> None:
    with pytest.raises(anthropic.BadRequestError, match=words):
        await create(AnthropicFake(), messages=messages)


async def test_missing_max_tokens_gives_the_real_error_shape(expose: Expose) -> None:
    fake = AnthropicFake()
    target = expose(fake)
    body = {"model": "m", "messages": [USER]}
    async with raw_client(target) as http:
        response = await http.post("/v1/messages", json=body, headers={"x-api-key": "k"})
    assert response.status_code == 400
    assert response.headers["request-id"] == "req_fake000000"
    assert response.json() == {
        "type": "error",
        "error": {"type": "invalid_request_error", "message": "max_tokens: Field required"},
        "request_id": "req_fake000000",
    }
    assert fake.records[0].status == 400 and fake.records[0].error_type == "invalid_request_error"
    assert fake.totals.requests == 0


async def test_429_twice_then_ok_is_absorbed_by_the_sdk_retries(expose: Expose) -> None:
    fake = AnthropicFake(fail(429, times=2, then=chat("finally")))
    message = await create(expose(fake), messages=[USER], max_retries=2)
    assert message.content[0].type == "text" and message.content[0].text == "finally"
    assert [r.status for r in fake.records] == [429, 429, 200]
    assert fake.records[0].error_type == "rate_limit_error"


@pytest.mark.parametrize(
    ("status", "error"),
    [
        (529, anthropic.OverloadedError),
        (500, anthropic.InternalServerError),
        (429, anthropic.RateLimitError),
    ],
)
async def test_errors_surface_after_the_retries(
    expose: Expose, status: int, error: type[anthropic.APIStatusError]
) -> None:
    fake = AnthropicFake(fail(status))
    with pytest.raises(error) as raised:
        await create(expose(fake), messages=[USER], max_retries=2)
    assert raised.value.status_code == status
    kind = {529: "overloaded_error", 500: "api_error", 429: "rate_limit_error"}[status]
    assert isinstance(raised.value.body, dict) and raised.value.body["error"]["type"] == kind
    assert len(fake.records) == 3
    assert raised.value.response.headers["retry-after-ms"] == "1"


async def test_an_aborted_stream_raises_a_transport_error_from_the_sdk(expose: Expose) -> None:
    """What the provider adapter can rely on: a connection dropped mid-stream raises
    httpx2.RemoteProtocolError (an httpx2.TransportError) out of the iteration. The anthropic SDK
    does not wrap it in anthropic.APIConnectionError, and does not retry it."""
    fake = AnthropicFake(cut(chat("a reply that is long enough to be cut " * 4), after_events=4))
    client = anthropic_async(expose(fake), max_retries=2)
    seen: list[str] = []
    with pytest.raises(httpx2.RemoteProtocolError):
        async with client.messages.stream(model="m", max_tokens=50, messages=[USER]) as stream:
            async for event in stream:
                seen.append(event.type)
    await client.close()
    assert "message_start" in seen and "message_stop" not in seen
    assert len(fake.records) == 1
    assert fake.records[0].started and not fake.records[0].finished


async def test_a_stream_that_just_ends_is_not_an_error_for_the_sdk(expose: Expose) -> None:
    """A body that ends cleanly before message_stop: the SDK raises nothing, and the final
    message has stop_reason None. The adapter must check for message_stop itself."""
    fake = AnthropicFake(cut(chat("a reply that is long enough to be cut " * 4), 5, mode="eof"))
    client = anthropic_async(expose(fake), max_retries=0)
    async with client.messages.stream(model="m", max_tokens=50, messages=[USER]) as stream:
        kinds = [event.type async for event in stream]
        message = await stream.get_final_message()
    await client.close()
    assert "message_stop" not in kinds and "message_delta" not in kinds
    assert message.stop_reason is None


async def test_an_error_event_mid_stream_raises_an_api_status_error(expose: Expose) -> None:
    fake = AnthropicFake(cut(chat("a reply " * 10), after_events=4, mode="error"))
    client = anthropic_async(expose(fake), max_retries=0)
    with pytest.raises(anthropic.APIStatusError) as raised:
        async with client.messages.stream(model="m", max_tokens=50, messages=[USER]) as stream:
            async for _ in stream:
                pass
    await client.close()
    # The HTTP status was 200: the SDK raises the base class, not OverloadedError.
    assert type(raised.value) is anthropic.APIStatusError
    assert raised.value.body == {
        "type": "error",
        "error": {"type": "overloaded_error", "message": "Overloaded"},
    }


async def test_a_cut_non_streaming_reply_is_a_connection_error(expose: Expose) -> None:
    fake = AnthropicFake(cut(chat("whole"), after_events=0))
    with pytest.raises(anthropic.APIConnectionError):
        await create(expose(fake), messages=[USER], max_retries=1)
    assert len(fake.records) == 2  # a cut while reading a whole response is retried
