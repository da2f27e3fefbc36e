"""The OpenAI fake through the real SDK: chunks, tool calls, usage with cached tokens, errors."""

from __future__ import annotations

import json
from typing import Any

import httpx2
import openai
import pytest

from fakes import (
    OpenAIFake,
    Text,
    Thinking,
    ToolCall,
    async_client,
    calls_tool,
    chat,
    constant,
    cut,
    fail,
    openai_async,
    reply,
)

from .conftest import Expose

pytestmark = pytest.mark.anyio

USER: Any = {"role": "user", "content": "What did we say about the tree?"}
ARGS = {"line": "40+8", "why": "détails"}
FULL = reply(
    Thinking("Zooming helps here. " * 3),
    Text("Let me look closer. " * 3),
    ToolCall("zoom", ARGS),
    ToolCall("zoom", {"line": "48+8"}),
)
LONG_SYSTEM: Any = {"role": "system", "content": "You are Ever. " * 700}  # about 2,450 tokens


async def test_streamed_content_reasoning_tool_calls_and_usage(expose: Expose) -> None:
    fake = OpenAIFake(constant(FULL))
    client = openai_async(expose(fake), max_retries=0)
    stream = await client.chat.completions.create(
        model="gpt-x",
        messages=[USER],
        stream=True,
        stream_options={"include_usage": True},
    )
    chunks = [chunk async for chunk in stream]
    await client.close()

    content, reasoning, finish = "", "", None
    calls: dict[int, dict[str, str]] = {}
    for chunk in chunks[:-1]:
        assert chunk.usage is None and len(chunk.choices) == 1
        delta = chunk.choices[0].delta
        content += delta.content or ""
        reasoning += getattr(delta, "reasoning_content", None) or ""
        for call in delta.tool_calls or []:
            entry = calls.setdefault(call.index, {"id": "", "name": "", "arguments": ""})
            entry["id"] += call.id or ""
            if call.function is not None:
                entry["name"] += call.function.name or ""
                entry["arguments"] += call.function.arguments or ""
        finish = chunk.choices[0].finish_reason or finish
    assert content == "Let me look closer. " * 3
    assert reasoning == "Zooming helps here. " * 3
    assert [json.loads(calls[k]["arguments"]) for k in (0, 1)] == [ARGS, {"line": "48+8"}]
    assert {calls[k]["name"] for k in (0, 1)} == {"zoom"} and calls[0]["id"] != calls[1]["id"]
    assert finish == "tool_calls"
    last = chunks[-1]
    assert last.choices == [] and last.usage is not None
    assert last.usage.prompt_tokens > 0 and last.usage.completion_tokens > 0
    assert last.usage.prompt_tokens_details is not None
    assert last.usage.prompt_tokens_details.cached_tokens == 0
    assert fake.records[0].finished


async def test_without_include_usage_there_is_no_usage_chunk() -> None:
    client = openai_async(OpenAIFake(chat("hi")), max_retries=0)
    stream = await client.chat.completions.create(model="m", messages=[USER], stream=True)
    chunks = [chunk async for chunk in stream]
    await client.close()
    assert all(chunk.choices for chunk in chunks)
    assert chunks[-1].choices[0].finish_reason == "stop"


async def test_non_streaming_completion(expose: Expose) -> None:
    client = openai_async(expose(OpenAIFake(constant(FULL))), max_retries=0)
    completion = await client.chat.completions.create(model="m", messages=[USER])
    await client.close()
    choice = completion.choices[0]
    assert choice.finish_reason == "tool_calls"
    assert choice.message.content == "Let me look closer. " * 3
    assert choice.message.tool_calls is not None and len(choice.message.tool_calls) == 2
    first = choice.message.tool_calls[0]
    assert first.type == "function" and json.loads(first.function.arguments) == ARGS
    assert completion.usage is not None and completion.usage.total_tokens > 0


async def test_prefix_caching_per_model_and_cache_key(expose: Expose) -> None:
    fake = OpenAIFake()
    client = openai_async(expose(fake), max_retries=0)

    async def cached(*messages: Any, model: str = "m", key: str | None = None) -> int:
        extra = {"prompt_cache_key": key} if key else {}
        completion = await client.chat.completions.create(
            model=model, messages=list(messages), **extra
        )
        assert completion.usage is not None and completion.usage.prompt_tokens_details is not None
        return completion.usage.prompt_tokens_details.cached_tokens or 0

    assert await cached(LONG_SYSTEM, USER) == 0
    second = await cached(LONG_SYSTEM, USER)
    assert second >= 1024 and (second - 1024) % 128 == 0
    assert second > fake.records[1].input_tokens  # nearly all of it
    grown = await cached(LONG_SYSTEM, USER, {"role": "assistant", "content": "x" * 2000}, USER)
    assert grown >= second
    assert await cached(LONG_SYSTEM, USER, model="other") == 0
    assert await cached(LONG_SYSTEM, USER, key="chat-1/turn") == 0
    assert await cached(LONG_SYSTEM, USER, key="chat-1/turn") == second
    assert await cached({"role": "system", "content": "short"}, USER) == 0
    await client.close()
    assert fake.totals.cache_read == 2 * second + grown


async def test_a_tool_loop_round_trip() -> None:
    client = openai_async(OpenAIFake(calls_tool("zoom", ARGS, then="Found it.")), max_retries=0)
    first = await client.chat.completions.create(model="m", messages=[USER])
    message = first.choices[0].message
    assert message.tool_calls is not None
    answer: Any = {"role": "tool", "tool_call_id": message.tool_calls[0].id, "content": "2 lines"}
    second = await client.chat.completions.create(
        model="m", messages=[USER, message.model_dump(exclude_none=True), answer]
    )
    await client.close()
    assert second.choices[0].message.content == "Found it."


async def test_tool_messages_must_answer_open_tool_calls(expose: Expose) -> None:
    client = openai_async(expose(OpenAIFake()), max_retries=0)
    stray: Any = {"role": "tool", "tool_call_id": "call_1", "content": "?"}
    with pytest.raises(openai.BadRequestError, match="must be a response to a preceeding"):
        await client.chat.completions.create(model="m", messages=[USER, stray])
    call = {"id": "call_1", "type": "function", "function": {"name": "zoom", "arguments": "{}"}}
    asked: Any = {"role": "assistant", "content": None, "tool_calls": [call]}
    with pytest.raises(openai.BadRequestError, match="did not have response messages: call_1"):
        await client.chat.completions.create(model="m", messages=[USER, asked, USER])
    await client.chat.completions.create(model="m", messages=[USER, asked, stray])
    await client.close()


async def test_auth_and_missing_messages_give_openai_error_shapes() -> None:
    fake = OpenAIFake()
    async with async_client(fake) as http:
        anonymous = await http.post("/v1/chat/completions", json={"model": "m", "messages": [USER]})
        headers = {"authorization": "Bearer k"}
        missing = await http.post("/v1/chat/completions", json={"model": "m"}, headers=headers)
    assert anonymous.status_code == 401
    error = anonymous.json()["error"]
    assert error["type"] == "invalid_request_error" and "API key" in error["message"]
    assert missing.status_code == 400
    assert missing.json() == {
        "error": {
            "message": "Missing required parameter: 'messages'.",
            "type": "invalid_request_error",
            "param": "messages",
            "code": "missing_required_parameter",
        }
    }


async def test_429_twice_then_ok_is_absorbed_by_the_sdk_retries(expose: Expose) -> None:
    fake = OpenAIFake(fail(429, times=2, then=chat("finally")))
    client = openai_async(expose(fake), max_retries=2)
    completion = await client.chat.completions.create(model="m", messages=[USER])
    await client.close()
    assert completion.choices[0].message.content == "finally"
    assert [r.status for r in fake.records] == [429, 429, 200]


@pytest.mark.parametrize(
    ("status", "error"), [(500, openai.InternalServerError), (503, openai.InternalServerError)]
)
async def test_server_errors_surface_after_the_retries(
    expose: Expose, status: int, error: type[openai.APIStatusError]
) -> None:
    fake = OpenAIFake(fail(status))
    client = openai_async(expose(fake), max_retries=1)
    with pytest.raises(error) as raised:
        await client.chat.completions.create(model="m", messages=[USER])
    await client.close()
    assert raised.value.status_code == status and len(fake.records) == 2
    body = raised.value.body
    assert isinstance(body, dict) and body["type"] == "server_error"


async def test_cut_streams(expose: Expose) -> None:
    """An aborted stream raises openai.APIConnectionError (the SDK wraps the transport error);
    a body that just ends leaves no finish_reason and no usage, and raises nothing."""
    long = chat("a reply that is long enough to be cut " * 4)
    for mode, raises in (("abort", True), ("eof", False)):
        fake = OpenAIFake(cut(long, after_events=3, mode=mode))
        client = openai_async(expose(fake), max_retries=0)
        chunks: list[Any] = []
        try:
            stream = await client.chat.completions.create(
                model="m", messages=[USER], stream=True, stream_options={"include_usage": True}
            )
            async for chunk in stream:
                chunks.append(chunk)
        except openai.APIConnectionError as exc:
            assert raises and isinstance(exc.__cause__, httpx2.RemoteProtocolError)
        else:
            assert not raises
        await client.close()
        assert len(chunks) == 3 and all(c.choices[0].finish_reason is None for c in chunks)
        assert fake.records[0].started and not fake.records[0].finished
