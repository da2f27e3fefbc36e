"""The adapters against the shared fake servers (tests/fakes): requests the fakes validate like
the real APIs (marks, tool pairing, roles), replies streamed like the real APIs, the Anthropic
prompt cache modelled by its rules."""

from __future__ import annotations

from typing import Any, Literal

import pytest

from evertalk.providers.anthropic import AnthropicProvider
from evertalk.providers.base import (
    Finished,
    Message,
    Provider,
    ProviderError,
    Text,
    Thinking,
    Tool,
    ToolResult,
    ToolUse,
    collect,
)
from evertalk.providers.layout import compaction_request, turn_request
from evertalk.providers.openai import OpenAIProvider
from fakes import (
    IN_PROCESS_URL,
    AnthropicFake,
    OpenAIFake,
    ToolCall,
    async_client,
    calls_tool,
    chat,
    cut,
    fail,
    reply,
    summarizer,
)
from fakes import Text as FakeText
from fakes import Thinking as FakeThinking

pytestmark = pytest.mark.anyio

MODEL = "claude-haiku-4-5"
TOOLS = [
    Tool(
        "zoom",
        "Open a line of the view.",
        {"type": "object", "properties": {"id": {"type": "integer"}, "n": {"type": "integer"}}},
    )
]
SYSTEM = "You are Ever. " * 200


def anthropic(fake: AnthropicFake, **kwargs: Any) -> AnthropicProvider:
    return AnthropicProvider(
        "test-key", IN_PROCESS_URL, http_client=async_client(fake.app), **kwargs
    )


def openai(fake: OpenAIFake, **kwargs: Any) -> OpenAIProvider:
    return OpenAIProvider(
        "test-key", f"{IN_PROCESS_URL}/v1", http_client=async_client(fake.app), **kwargs
    )


def view(lines: int) -> str:
    body = "".join(
        f"{i}+1|user: message number {i} about the backups of ~/notes\n" for i in range(lines)
    )
    return "<chat>\n" + body + "</chat>"


async def test_turns_read_the_previous_view_from_the_cache() -> None:
    fake = AnthropicFake(chat("Sure."), min_cache_tokens=256)
    p = anthropic(fake)
    first = await collect(p, turn_request(MODEL, SYSTEM, TOOLS, view(400), [Text("hi")], [], 500))
    second = await collect(
        p, turn_request(MODEL, SYSTEM, TOOLS, view(403), [Text("again")], [], 500)
    )
    assert first.usage.cache_read == 0 and first.usage.cache_write > 0
    # the second turn reads everything up to the first turn's last whole block
    assert second.usage.cache_read > 0.9 * second.usage.prompt
    assert second.text == "Sure."


async def test_a_tool_loop_passes_validation_and_keeps_reading_the_cache() -> None:
    fake = AnthropicFake(calls_tool("zoom", {"id": 0, "n": 1}), min_cache_tokens=256)
    p = anthropic(fake)
    rendered = view(300)
    steps: list[Message] = []
    usages = []
    for _ in range(12):
        finished = await collect(
            p, turn_request(MODEL, SYSTEM, TOOLS, rendered, [Text("zoom please")], steps, 500)
        )
        usages.append(finished.usage)
        if not finished.tool_uses:
            break
        steps.append(Message("assistant", finished.parts))
        results = [ToolResult(use.id, [Text("0+1|user: hello")]) for use in finished.tool_uses]
        steps.append(Message("user", list(results)))
    assert all(record.status == 200 for record in fake.records)
    assert len(usages) == 2
    assert usages[1].cache_read > 0.9 * usages[1].prompt


async def test_thinking_and_tool_calls_round_trip() -> None:
    script = reply(
        FakeThinking("I should zoom.", signature="sig-1"),
        FakeText("Zooming."),
        ToolCall("zoom", {"id": 2, "n": 2}, id="toolu_x"),
    )
    fake = AnthropicFake(lambda call: script if not call.after_tool_result else reply("Done."))
    p = anthropic(fake)
    request = turn_request(MODEL, SYSTEM, TOOLS, view(10), [Text("q")], [], 4000, effort="low")
    finished = await collect(p, request)
    assert finished.parts == [
        Thinking("I should zoom.", "sig-1"),
        Text("Zooming."),
        ToolUse("toolu_x", "zoom", {"id": 2, "n": 2}),
    ]
    steps = [
        Message("assistant", finished.parts),
        Message("user", [ToolResult("toolu_x", [Text("2+1|x"), Text("3+1|y")])]),
    ]
    done = await collect(
        p, turn_request(MODEL, SYSTEM, TOOLS, view(10), [Text("q")], steps, 4000, effort="low")
    )
    assert done.text == "Done."
    body = fake.records[-1].body
    assert body is not None
    assert body["messages"][1]["content"][0] == {
        "type": "thinking",
        "thinking": "I should zoom.",
        "signature": "sig-1",
    }


async def test_compaction_tries_in_one_conversation() -> None:
    fake = AnthropicFake(summarizer([700, 600, 400]), min_cache_tokens=256)
    p = anthropic(fake)
    task = "Compaction: compress message 7.\n<input>\nuser: please back up ~/notes\n</input>"
    followups: list[tuple[str, str]] = []
    for _ in range(3):
        request = compaction_request(MODEL, SYSTEM, TOOLS, view(60), task, followups, 2000)
        finished = await collect(p, request)
        followups.append((finished.text, f"That line has {len(finished.text)} bytes; shorter."))
    assert [len(reply.encode()) for reply, _ in followups] == [700, 600, 400]
    assert all(record.status == 200 for record in fake.records)
    last = fake.records[-1]
    assert last.body is not None and last.body["tool_choice"] == {"type": "none"}
    assert finished.usage.cache_read > 0


@pytest.mark.parametrize("mode", ["abort", "eof"])
async def test_cut_streams_are_errors(mode: Literal["abort", "eof"]) -> None:
    fake = AnthropicFake(cut(chat("a reply that will not arrive whole " * 5), 4, mode))
    with pytest.raises(ProviderError) as info:
        await collect(anthropic(fake), turn_request(MODEL, "S", [], view(3), [Text("q")], [], 50))
    assert info.value.kind == "cut"


async def test_error_event_mid_stream() -> None:
    fake = AnthropicFake(cut(chat("x " * 100), 4, "error"))
    with pytest.raises(ProviderError) as info:
        await collect(anthropic(fake), turn_request(MODEL, "S", [], view(3), [Text("q")], [], 50))
    assert info.value.kind in ("overloaded", "server")


async def test_retries_then_success_and_exhausted_retries() -> None:
    fake = AnthropicFake(fail(429, times=2, then=chat("ok")))
    finished = await collect(
        anthropic(fake, max_retries=2), turn_request(MODEL, "S", [], view(3), [Text("q")], [], 50)
    )
    assert finished.text == "ok" and len(fake.records) == 3
    fake = AnthropicFake(fail(529))
    with pytest.raises(ProviderError) as info:
        await collect(
            anthropic(fake, max_retries=2),
            turn_request(MODEL, "S", [], view(3), [Text("q")], [], 50),
        )
    assert (info.value.kind, info.value.status) == ("overloaded", 529)
    assert len(fake.records) == 3


# --- OpenAI-compatible -----------------------------------------------------------------------


async def test_openai_turn_tool_loop_and_prefix_cache() -> None:
    fake = OpenAIFake(calls_tool("zoom", {"id": 0, "n": 1}), min_cache_tokens=256)
    p: Provider = openai(fake)
    steps: list[Message] = []
    results: list[Finished] = []
    for _ in range(3):
        request = turn_request(
            "gpt-5-mini", SYSTEM, TOOLS, view(300), [Text("q")], steps, 500, cache_key="c/turn"
        )
        finished = await collect(p, request)
        results.append(finished)
        if not finished.tool_uses:
            break
        steps.append(Message("assistant", finished.parts))
        steps.append(
            Message("user", [ToolResult(u.id, [Text("0+1|hi")]) for u in finished.tool_uses])
        )
    assert [r.stop for r in results] == ["tool_use", "end_turn"]
    assert results[1].usage.cache_read > 0
    assert all(record.status == 200 for record in fake.records)
    body = fake.records[0].body
    assert body is not None and body["prompt_cache_key"] == "c/turn"


async def test_openai_cut_and_errors() -> None:
    fake = OpenAIFake(cut(chat("half " * 40), 3, "eof"))
    request = turn_request("gpt-5-mini", "S", [], view(3), [Text("q")], [], 50)
    with pytest.raises(ProviderError) as info:
        await collect(openai(fake), request)
    assert info.value.kind == "cut"
    fake = OpenAIFake(fail(500))
    with pytest.raises(ProviderError) as info:
        await collect(openai(fake, max_retries=1), request)
    assert (info.value.kind, info.value.status) == ("server", 500)
