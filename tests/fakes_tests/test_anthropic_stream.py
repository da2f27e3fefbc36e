"""The Anthropic fake through the real SDK: streamed and whole replies, usage, real streaming."""

from __future__ import annotations

from typing import Any

import anthropic
import httpx2
import pytest

from fakes import (
    IN_PROCESS_URL,
    AnthropicFake,
    Text,
    Thinking,
    ToolCall,
    anthropic_async,
    async_client,
    constant,
    reply,
    serve,
    sync_client,
)

from .conftest import Expose

pytestmark = pytest.mark.anyio

THOUGHT = "The user wants the details of line 40+8; zooming is the way. " * 3
ANSWER = "Let me look closer at that part of our chat — un instant, s'il vous plaît. " * 2
TOOL_INPUT = {"line": "40+8", "why": "détails", "depth": [1, 2, 3]}
FULL = reply(Thinking(THOUGHT, signature="sig-123"), Text(ANSWER), ToolCall("zoom", TOOL_INPUT))
MESSAGES: list[Any] = [{"role": "user", "content": "What did we say about the tree?"}]


async def test_stream_helper_delivers_thinking_text_and_tool_use(expose: Expose) -> None:
    fake = AnthropicFake(constant(FULL))
    client = anthropic_async(expose(fake), max_retries=0)
    deltas: list[str] = []
    async with client.messages.stream(model="m", max_tokens=500, messages=MESSAGES) as stream:
        async for event in stream:
            if event.type == "content_block_delta":
                deltas.append(event.delta.type)
        message = await stream.get_final_message()
    await client.close()

    assert [block.type for block in message.content] == ["thinking", "text", "tool_use"]
    thinking, text, tool = message.content
    assert thinking.type == "thinking" and thinking.thinking == THOUGHT
    assert thinking.signature == "sig-123"
    assert text.type == "text" and text.text == ANSWER
    assert tool.type == "tool_use" and tool.name == "zoom" and tool.input == TOOL_INPUT
    assert tool.id.startswith("toolu_")
    assert message.stop_reason == "tool_use"
    assert deltas.count("signature_delta") == 1
    assert deltas.count("thinking_delta") > 1 and deltas.count("text_delta") > 1
    assert deltas.count("input_json_delta") > 1  # the tool input arrives in pieces
    usage = message.usage
    assert usage.input_tokens > 0 and usage.output_tokens > 1
    assert usage.cache_creation_input_tokens == 0 and usage.cache_read_input_tokens == 0
    record = fake.records[0]
    assert record.started and record.finished and record.body is not None
    assert record.body["messages"] == MESSAGES and b'"stream":true' in record.raw.replace(b" ", b"")
    assert fake.totals.requests == 1 and fake.totals.output == usage.output_tokens


async def test_create_stream_true_yields_the_raw_event_sequence(expose: Expose) -> None:
    fake = AnthropicFake(constant(reply(Thinking("hm"), "Hi there.")))
    client = anthropic_async(expose(fake), max_retries=0)
    stream = await client.messages.create(model="m", max_tokens=50, messages=MESSAGES, stream=True)
    events = [event async for event in stream]
    await client.close()

    kinds = [e.type for e in events]
    assert kinds[0] == "message_start" and kinds[-2:] == ["message_delta", "message_stop"]
    assert kinds.count("content_block_start") == kinds.count("content_block_stop") == 2
    start = events[0]
    assert start.type == "message_start"
    usage = start.message.usage
    assert usage.input_tokens > 0
    assert usage.cache_creation_input_tokens == 0 and usage.cache_read_input_tokens == 0
    delta = events[-2]
    assert delta.type == "message_delta"
    assert delta.delta.stop_reason == "end_turn" and delta.usage.output_tokens > 0
    text = "".join(
        e.delta.text
        for e in events
        if e.type == "content_block_delta" and e.delta.type == "text_delta"
    )
    assert text == "Hi there."


async def test_ping_events_are_sent_and_skipped_by_the_sdk() -> None:
    fake = AnthropicFake(constant(reply("Hi.")))
    async with async_client(fake) as http:
        body = {"model": "m", "max_tokens": 5, "messages": MESSAGES, "stream": True}
        response = await http.post("/v1/messages", json=body, headers={"x-api-key": "k"})
    assert response.headers["content-type"].startswith("text/event-stream")
    assert "event: ping\ndata: " in response.text
    assert response.text.endswith('event: message_stop\ndata: {"type": "message_stop"}\n\n')


async def test_non_streaming_create(expose: Expose) -> None:
    fake = AnthropicFake(constant(FULL))
    client = anthropic_async(expose(fake), max_retries=0)
    message = await client.messages.create(model="m", max_tokens=500, messages=MESSAGES)
    await client.close()
    assert [block.type for block in message.content] == ["thinking", "text", "tool_use"]
    assert message.stop_reason == "tool_use" and message.usage.output_tokens > 1
    assert message.content[2].type == "tool_use" and message.content[2].input == TOOL_INPUT


async def test_events_reach_the_client_as_they_are_sent(expose: Expose) -> None:
    paced = reply("one two three four five six", chunk_delay=0.1)
    fake = AnthropicFake(constant(paced), text_chunk=4)
    client = anthropic_async(expose(fake), max_retries=0)
    ended_before: list[bool] = []  # whether the fake had sent its last event, at each delta
    async with client.messages.stream(model="m", max_tokens=50, messages=MESSAGES) as stream:
        async for event in stream:
            if event.type == "content_block_delta":
                ended_before.append(fake.records[0].finished)
    await client.close()
    # 7 text deltas, then 3 more events, each 0.1 s after the last: buffered delivery would
    # bring the first delta only once the stream had ended
    assert len(ended_before) == 7 and not ended_before[0]
    assert fake.records[0].finished


async def test_closing_a_stream_early_leaves_the_fake_unfinished(expose: Expose) -> None:
    fake = AnthropicFake(constant(reply("x" * 400, chunk_delay=0.01)), text_chunk=4)
    client = anthropic_async(expose(fake), max_retries=0)
    async with client.messages.stream(model="m", max_tokens=50, messages=MESSAGES) as stream:
        async for event in stream:
            if event.type == "content_block_delta":
                break
    await client.close()
    assert fake.records[0].started and not fake.records[0].finished


def test_sync_client_in_process_and_over_loopback() -> None:
    fake = AnthropicFake(constant(FULL))
    with serve(fake) as url:
        clients = [
            anthropic.Anthropic(
                api_key="k", base_url=IN_PROCESS_URL, http_client=sync_client(fake)
            ),
            anthropic.Anthropic(api_key="k", base_url=url),
        ]
        for client in clients:
            with client.messages.stream(model="m", max_tokens=500, messages=MESSAGES) as stream:
                message = stream.get_final_message()
            client.close()
            assert [b.type for b in message.content] == ["thinking", "text", "tool_use"]
    assert [r.finished for r in fake.records] == [True, True]


async def test_a_key_is_required_and_bearer_auth_counts_as_one() -> None:
    fake = AnthropicFake(api_key="right")
    body = {"model": "m", "max_tokens": 5, "messages": MESSAGES}
    async with async_client(fake) as http:
        missing = await http.post("/v1/messages", json=body)
        wrong = await http.post("/v1/messages", json=body, headers={"x-api-key": "wrong"})
        bearer = await http.post(
            "/v1/messages", json=body, headers={"authorization": "Bearer right"}
        )
    assert missing.status_code == wrong.status_code == 401
    assert missing.json() == {
        "type": "error",
        "error": {"type": "authentication_error", "message": "x-api-key header is required"},
        "request_id": "req_fake000000",
    }
    assert bearer.status_code == 200
    # The SDK 2.x sends its api_key as `Authorization: Bearer`, not as x-api-key.
    assert fake.records[2].headers["authorization"] == "Bearer right"


async def test_in_process_transport_is_an_httpx2_transport() -> None:
    http = async_client(AnthropicFake())
    assert isinstance(http, httpx2.AsyncClient)
    await http.aclose()
