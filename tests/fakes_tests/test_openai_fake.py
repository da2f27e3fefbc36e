"""The OpenAI fake through the real SDK: chunks, tool calls, usage with cached tokens, errors."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx2
import openai
import pytest

from fakes import (
    OpenAIFake,
    Script,
    Text,
    Thinking,
    ToolCall,
    async_client,
    calls_tool,
    chat,
    constant,
    cut,
    fail,
    interrupted_by_next,
    openai_async,
    raw_client,
    refuses_null_content,
    reply,
    slow,
    without_stream_usage,
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


# --- local servers' ways (opt-in) ------------------------------------------------------------


async def raw_stream(http: httpx2.AsyncClient, body: dict[str, Any]) -> tuple[int, bytes]:
    """Status and whole body of a request sent as the SDK would, read to its end."""
    headers = {"authorization": "Bearer k"}
    async with http.stream("POST", "/v1/chat/completions", json=body, headers=headers) as answer:
        return answer.status_code, await answer.aread()


def sse_data(raw: bytes) -> list[str]:
    """The `data:` payloads of an SSE body, in order."""
    return [line[6:] for line in raw.decode().splitlines() if line.startswith("data: ")]


STREAMED: Any = {"model": "m", "messages": [USER], "stream": True}


async def test_a_cut_that_ends_with_done_has_no_finish_reason(expose: Expose) -> None:
    fake = OpenAIFake(cut(chat("a reply long enough to be cut " * 4), after_events=3, mode="done"))
    async with raw_client(expose(fake)) as http:
        status, raw = await raw_stream(http, STREAMED)
    data = sse_data(raw)
    assert status == 200 and data[-1] == "[DONE]" and len(data) == 4
    assert all(json.loads(d)["choices"][0]["finish_reason"] is None for d in data[:-1])
    assert fake.records[0].started and not fake.records[0].finished


async def test_a_newer_request_interrupts_an_interruptible_stream(expose: Expose) -> None:
    """As a llama-cpp-python server: the stream in flight ends with [DONE] and no finish reason
    once another request comes; the newer one is answered in full."""
    paced = interrupted_by_next(slow(0, chat("word " * 200), chunk_delay=0.01))
    fake = OpenAIFake(Script(chat("second")).route(lambda c: c.index == 0, paced), text_chunk=5)
    target = expose(fake)
    client = openai_async(target, max_retries=0)
    async with raw_client(target) as http:
        headers = {"authorization": "Bearer k"}
        request = http.stream("POST", "/v1/chat/completions", json=STREAMED, headers=headers)
        async with request as first:
            lines = first.aiter_lines()
            seen = [line async for line in _until_content(lines)]
            second = await client.chat.completions.create(model="m", messages=[USER])
            seen += [line async for line in lines]
    await client.close()
    data = [line[6:] for line in seen if line.startswith("data: ")]
    assert data[-1] == "[DONE]"
    chunks = [json.loads(d) for d in data[:-1]]
    assert all(c["choices"][0]["finish_reason"] is None for c in chunks)
    assert "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks) != "word " * 200
    assert second.choices[0].message.content == "second"
    assert second.choices[0].finish_reason == "stop"
    assert fake.records[0].interrupted and not fake.records[0].finished
    assert not fake.records[1].interrupted


async def _until_content(lines: AsyncIterator[str]) -> AsyncIterator[str]:
    """The lines up to and including the first that carries some content."""
    async for line in lines:
        yield line
        if '"content": "w' in line:
            return


async def test_a_stream_alone_is_never_interrupted(expose: Expose) -> None:
    fake = OpenAIFake(interrupted_by_next(chat("all of it")))
    async with raw_client(expose(fake)) as http:
        status, raw = await raw_stream(http, STREAMED)
    data = sse_data(raw)
    assert status == 200 and data[-1] == "[DONE]"
    assert json.loads(data[-2])["choices"][0]["finish_reason"] == "stop"
    assert fake.records[0].finished and not fake.records[0].interrupted


async def test_a_prompt_over_the_window_gets_an_empty_200_when_streamed(expose: Expose) -> None:
    fake = OpenAIFake(chat("fits"), context_window=40, overflow="empty")
    short: Any = {**STREAMED, "messages": [{"role": "user", "content": "hi"}]}
    async with raw_client(expose(fake)) as http:
        assert (await raw_stream(http, short))[0] == 200
        status, raw = await raw_stream(http, {**STREAMED, "messages": [LONG_SYSTEM, USER]})
        plain = await http.post(
            "/v1/chat/completions",
            json={"model": "m", "messages": [LONG_SYSTEM, USER]},
            headers={"authorization": "Bearer k"},
        )
    assert (status, raw) == (200, b"")
    assert not fake.records[1].started and fake.records[1].input_tokens == 0
    # not streamed, the same server can answer with its error
    assert plain.status_code == 400
    assert plain.json()["error"]["code"] == "context_length_exceeded"


async def test_by_default_a_prompt_over_the_window_gets_openais_400(expose: Expose) -> None:
    client = openai_async(expose(OpenAIFake(context_window=40)), max_retries=0)
    with pytest.raises(openai.BadRequestError) as raised:
        await client.chat.completions.create(model="m", messages=[LONG_SYSTEM, USER], stream=True)
    await client.close()
    body = raised.value.body
    assert isinstance(body, dict) and body["code"] == "context_length_exceeded"
    assert "maximum context length is 40 tokens" in body["message"]


async def test_null_content_gets_a_500_validation_error(expose: Expose) -> None:
    fake = OpenAIFake(refuses_null_content(chat("fine")))
    client = openai_async(expose(fake), max_retries=0)
    call = {"id": "call_1", "type": "function", "function": {"name": "zoom", "arguments": "{}"}}
    answer: Any = {"role": "tool", "tool_call_id": "call_1", "content": "2 lines"}

    def asked(content: str | None) -> Any:
        return {"role": "assistant", "content": content, "tool_calls": [call]}

    with pytest.raises(openai.InternalServerError) as raised:
        await client.chat.completions.create(model="m", messages=[USER, asked(None), answer])
    body = raised.value.body
    assert raised.value.status_code == 500
    assert isinstance(body, dict) and "validation error" in body["message"]
    accepted = await client.chat.completions.create(model="m", messages=[USER, asked(""), answer])
    await client.close()
    assert accepted.choices[0].message.content == "fine"
    assert [r.status for r in fake.records] == [500, 200]


@pytest.mark.parametrize("timings", [False, True])
async def test_streams_without_usage(expose: Expose, timings: bool) -> None:
    """No usage chunk though the request asks for one; llama.cpp's server tells its own counts
    in `timings` instead."""
    fake = OpenAIFake(without_stream_usage(chat("hi there"), timings=timings))
    client = openai_async(expose(fake), max_retries=0)
    stream = await client.chat.completions.create(
        model="m", messages=[USER], stream=True, stream_options={"include_usage": True}
    )
    chunks = [chunk async for chunk in stream]
    await client.close()
    assert all(chunk.usage is None and chunk.choices for chunk in chunks)
    last = chunks[-1]
    assert last.choices[0].finish_reason == "stop"
    record = fake.records[0]
    counts = (last.model_extra or {}).get("timings")
    if not timings:
        assert counts is None
        return
    assert isinstance(counts, dict)
    assert (counts["prompt_n"], counts["cache_n"], counts["predicted_n"]) == (
        record.input_tokens,
        record.cache_read,
        record.output_tokens,
    )
    assert record.input_tokens > 0 and record.output_tokens > 0
