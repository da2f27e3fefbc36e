"""The Anthropic adapter through the real SDK, against an in-process fake Messages API."""

from __future__ import annotations

import traceback
from collections.abc import AsyncGenerator
from typing import Any, cast

import httpx2
import pytest

from evertalk.providers.anthropic import AnthropicProvider, thinking_params, uses_adaptive_thinking
from evertalk.providers.base import (
    Event,
    Finished,
    Image,
    Message,
    ProviderError,
    Request,
    Started,
    Text,
    TextDelta,
    TextDone,
    Thinking,
    ThinkingDelta,
    Tool,
    ToolResult,
    ToolUse,
    ToolUseStarted,
    Usage,
    collect,
)
from evertalk.providers.layout import compaction_request, turn_request

from .fake_http import (
    Script,
    anthropic_events,
    anthropic_usage,
    error_answer,
    sse,
    stream_answer,
)

pytestmark = pytest.mark.anyio

KEY = "sk-ant-FAKE-KEY-0123456789-do-not-leak"
TOOLS = [
    Tool("zoom", "Open a line.", {"type": "object", "properties": {"id": {"type": "integer"}}})
]
EPHEMERAL = {"type": "ephemeral"}


def provider(script: Script, **kwargs: Any) -> AnthropicProvider:
    return AnthropicProvider(KEY, "https://api.example.test", http_client=script.client(), **kwargs)


def simple_request(**kwargs: Any) -> Request:
    fields: dict[str, Any] = {
        "model": "claude-haiku-4-5",
        "system": [Text("You are Ever.")],
        "tools": [],
        "messages": [Message("user", [Text("hello")])],
        "max_tokens": 1000,
    }
    fields.update(kwargs)
    return Request(**fields)


def ok(blocks: list[dict[str, Any]] | None = None, **kwargs: Any) -> Any:
    return stream_answer(
        sse(anthropic_events(blocks or [{"type": "text", "text": "hi"}], **kwargs))
    )


async def events_of(p: AnthropicProvider, request: Request) -> list[Event]:
    return [event async for event in p.stream(request)]


# --- the request body ------------------------------------------------------------------------


async def test_turn_request_body_has_marks_system_and_tools() -> None:
    script = Script([ok()])
    view = "<chat>\n" + "".join(f"{i}+1|line {i}\n" for i in range(10)) + "</chat>"
    request = turn_request(
        "claude-haiku-4-5", "SYSTEM", TOOLS, view, [Text("header\nhello")], [], 2000
    )
    await collect(provider(script), request)
    body = script.requests[0].body
    assert body["model"] == "claude-haiku-4-5"
    assert body["max_tokens"] == 2000
    assert body["stream"] is True
    assert body["system"] == [{"type": "text", "text": "SYSTEM", "cache_control": EPHEMERAL}]
    assert body["tools"] == [
        {"name": "zoom", "description": "Open a line.", "input_schema": TOOLS[0].input_schema}
    ]
    assert "tool_choice" not in body
    assert "thinking" not in body
    (message,) = body["messages"]
    assert message["role"] == "user"
    content = message["content"]
    # 11 lines before </chat>: two whole blocks of 4, then 3 lines and </chat>, then the tail
    assert [block["text"] for block in content] == [
        "<chat>\n0+1|line 0\n1+1|line 1\n2+1|line 2\n",
        "3+1|line 3\n4+1|line 4\n5+1|line 5\n6+1|line 6\n",
        "7+1|line 7\n8+1|line 8\n9+1|line 9\n</chat>",
        "\nheader\nhello",
    ]
    assert [block.get("cache_control") for block in content] == [None, EPHEMERAL, None, EPHEMERAL]
    assert "".join(block["text"] for block in content[:3]) == view


async def test_compaction_body_has_tool_choice_none_and_marked_system() -> None:
    script = Script([ok()])
    context = "<chat>\n" + "".join(f"{i}+1|x\n" for i in range(7)) + "</chat>"
    request = compaction_request(
        "claude-haiku-4-5",
        "SYSTEM",
        TOOLS,
        context,
        "Compaction: do it",
        [("long", "shorter")],
        900,
    )
    await collect(provider(script), request)
    body = script.requests[0].body
    assert body["tool_choice"] == {"type": "none"}
    assert body["system"] == [{"type": "text", "text": "SYSTEM", "cache_control": EPHEMERAL}]
    first, reply, followup = body["messages"]
    assert [b.get("cache_control") for b in first["content"]] == [None, EPHEMERAL, None, None]
    assert first["content"][-1]["text"] == "\nCompaction: do it"
    assert reply == {"role": "assistant", "content": [{"type": "text", "text": "long"}]}
    assert followup["content"] == [{"type": "text", "text": "shorter", "cache_control": EPHEMERAL}]


async def test_every_block_kind_is_translated() -> None:
    script = Script([ok()])
    image = Image("image/png", "iVBORw0KGgo=")
    request = simple_request(
        messages=[
            Message("user", [Text("look"), image]),
            Message(
                "assistant",
                [
                    Thinking("hmm", "sig-1"),
                    Thinking("", "opaque", redacted=True),
                    Text("zooming"),
                    ToolUse("toolu_1", "zoom", {"id": 0, "n": 1}),
                ],
            ),
            Message(
                "user",
                [
                    ToolResult("toolu_1", [Text("0+1|user: hi"), image], is_error=True, mark=True),
                    Image("image/jpeg", "/9j/", mark=True),
                ],
            ),
        ]
    )
    await collect(provider(script), request)
    messages = script.requests[0].body["messages"]
    png = {"type": "base64", "media_type": "image/png", "data": "iVBORw0KGgo="}
    assert messages[0]["content"] == [
        {"type": "text", "text": "look"},
        {"type": "image", "source": png},
    ]
    assert messages[1]["content"] == [
        {"type": "thinking", "thinking": "hmm", "signature": "sig-1"},
        {"type": "redacted_thinking", "data": "opaque"},
        {"type": "text", "text": "zooming"},
        {"type": "tool_use", "id": "toolu_1", "name": "zoom", "input": {"id": 0, "n": 1}},
    ]
    assert messages[2]["content"] == [
        {
            "type": "tool_result",
            "tool_use_id": "toolu_1",
            "content": [{"type": "text", "text": "0+1|user: hi"}, {"type": "image", "source": png}],
            "is_error": True,
            "cache_control": EPHEMERAL,
        },
        {
            "type": "image",
            "source": {"type": "base64", "media_type": "image/jpeg", "data": "/9j/"},
            "cache_control": EPHEMERAL,
        },
    ]


async def test_same_request_gives_identical_bytes() -> None:
    script = Script([ok()])
    p = provider(script)
    view = "<chat>\n" + "".join(f"{i}+1|é {i}\n" for i in range(30)) + "</chat>"
    for _ in range(2):
        await collect(p, turn_request("claude-haiku-4-5", "S", TOOLS, view, [Text("m")], [], 10))
    assert script.requests[0].raw == script.requests[1].raw


async def test_effort_on_an_older_model_is_a_thinking_budget() -> None:
    script = Script([ok()])
    await collect(provider(script), simple_request(effort="medium", max_tokens=1000))
    body = script.requests[0].body
    assert body["thinking"] == {"type": "enabled", "budget_tokens": 8192}
    assert body["max_tokens"] == 1000 + 8192
    assert "output_config" not in body


async def test_effort_on_a_current_model_is_adaptive_thinking() -> None:
    script = Script([ok()])
    await collect(provider(script), simple_request(model="claude-haiku-5-5", effort="high"))
    body = script.requests[0].body
    assert body["thinking"] == {"type": "adaptive", "display": "summarized"}
    assert body["output_config"] == {"effort": "high"}
    assert body["max_tokens"] == 1000


def test_thinking_budgets_and_model_families() -> None:
    assert thinking_params("claude-haiku-4-5", "low", 100) == {
        "thinking": {"type": "enabled", "budget_tokens": 2048},
        "max_tokens": 2148,
    }
    assert thinking_params("claude-haiku-4-5", "high", 100)["thinking"]["budget_tokens"] == 16384
    assert thinking_params("claude-haiku-4-5", None, 100) == {}
    assert thinking_params("claude-opus-5", "high", 100, adaptive=False)["max_tokens"] == 16484
    adaptive = [
        "claude-opus-4-6",
        "claude-sonnet-4-6",
        "claude-opus-4-8",
        "claude-sonnet-5",
        "claude-haiku-5-5",
        "claude-fable-5-1",
        "claude-mythos-preview",
        "claude-opus-5-5",
    ]
    manual = [
        "claude-haiku-4-5",
        "claude-haiku-4-5-20251001",
        "claude-sonnet-4-5-20250929",
        "claude-opus-4-5",
        "claude-opus-4-20250514",
        "claude-3-7-sonnet-20250219",
        "some-proxy-model",
    ]
    assert all(uses_adaptive_thinking(m) for m in adaptive)
    assert not any(uses_adaptive_thinking(m) for m in manual)
    with pytest.raises(ProviderError) as info:
        thinking_params("claude-haiku-4-5", "extreme", 100)
    assert info.value.kind == "bad_request"


# --- the reply stream ------------------------------------------------------------------------


async def test_stream_events_and_finished_parts() -> None:
    blocks: list[dict[str, Any]] = [
        {"type": "thinking", "thinking": "let me see", "signature": "sig-abc"},
        {"type": "redacted_thinking", "data": "enc-data"},
        {"type": "text", "text": "I will zoom."},
        {"type": "tool_use", "id": "toolu_9", "name": "zoom", "input": {"id": 4, "n": 2}},
    ]
    usage = anthropic_usage(input_tokens=12, output=1, read=3000, write=200)
    script = Script([ok(blocks, stop="tool_use", usage=usage, output_tokens=77)])
    events = await events_of(provider(script), simple_request())
    assert isinstance(events[0], Started)
    assert sum(isinstance(e, Started) for e in events) == 1
    thoughts = "".join(e.text for e in events if isinstance(e, ThinkingDelta))
    texts = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert thoughts == "let me see"
    assert texts == "I will zoom."
    finished = events[-1]
    assert isinstance(finished, Finished)
    assert finished.parts == [
        Thinking("let me see", "sig-abc"),
        Thinking("", "enc-data", redacted=True),
        Text("I will zoom."),
        ToolUse("toolu_9", "zoom", {"id": 4, "n": 2}),
    ]
    assert finished.stop == "tool_use"
    assert finished.usage == Usage(input=12, output=77, cache_read=3000, cache_write=200)
    assert finished.model == "claude-haiku-4-5"
    assert finished.text == "I will zoom."


def markers(events: list[Event]) -> list[Event | type[Finished]]:
    """The block markers of a stream, in order, with Finished as its type."""
    return [
        Finished if isinstance(e, Finished) else e
        for e in events
        if isinstance(e, TextDone | ToolUseStarted | Finished)
    ]


async def test_each_text_block_is_announced_when_it_ends() -> None:
    blocks: list[dict[str, Any]] = [
        {"type": "thinking", "thinking": "hmm", "signature": "sig"},
        {"type": "text", "text": "I will zoom."},
        {"type": "tool_use", "id": "toolu_1", "name": "zoom", "input": {"id": 4}},
        {"type": "text", "text": "Then sum up."},
    ]
    events = await events_of(provider(Script([ok(blocks, stop="tool_use")])), simple_request())
    assert markers(events) == [
        TextDone("I will zoom."),
        ToolUseStarted(),
        TextDone("Then sum up."),
        Finished,
    ]
    # a block's TextDone follows its last delta, before anything of the next block
    done = events.index(TextDone("I will zoom."))
    assert isinstance(events[done - 1], TextDelta) and events[done + 1] == ToolUseStarted()
    finished = events[-1]
    assert isinstance(finished, Finished)
    announced = [e.text for e in events if isinstance(e, TextDone)]
    assert announced == [p.text for p in finished.parts if isinstance(p, Text)]


async def test_a_text_block_is_announced_before_the_stream_is_cut() -> None:
    blocks: list[dict[str, Any]] = [
        {"type": "text", "text": "Let me look."},
        {"type": "tool_use", "id": "toolu_1", "name": "zoom", "input": {"id": 4}},
    ]
    whole = anthropic_events(blocks, finish=False)
    upto = next(i for i, (name, _) in enumerate(whole) if name == "content_block_stop")
    script = Script([stream_answer(sse(whole[: upto + 1]))])
    events: list[Event] = []
    with pytest.raises(ProviderError) as info:
        async for event in provider(script).stream(simple_request()):
            events.append(event)
    assert info.value.kind == "cut"
    assert markers(events) == [TextDone("Let me look.")]


async def test_a_text_block_left_open_is_announced_before_finished() -> None:
    blocks: list[dict[str, Any]] = [{"type": "text", "text": "never stopped"}]
    wire = [e for e in anthropic_events(blocks) if e[0] != "content_block_stop"]
    events = await events_of(provider(Script([stream_answer(sse(wire))])), simple_request())
    assert markers(events) == [TextDone("never stopped"), Finished]


async def test_stop_reasons_are_mapped() -> None:
    for wire, ours in [
        ("end_turn", "end_turn"),
        ("max_tokens", "max_tokens"),
        ("model_context_window_exceeded", "context_window"),
        ("refusal", "refusal"),
        ("pause_turn", "pause_turn"),
        ("something_new", "other"),
    ]:
        script = Script([ok(stop=wire)])
        finished = await collect(provider(script), simple_request())
        assert finished.stop == ours


def cut_in_tool_input(stop: str, keep: int = 1) -> Any:
    """A text, then a call of zoom whose input stops after `keep` of its two JSON deltas."""
    blocks: list[dict[str, Any]] = [
        {"type": "text", "text": "Let me look."},
        {"type": "tool_use", "id": "toolu_1", "name": "zoom", "input": {"id": 4}},
    ]
    events = anthropic_events(blocks, stop=stop)
    deltas = [i for i, (_, data) in enumerate(events) if "partial_json" in str(data)]
    dropped = set(deltas[keep:])
    return ok_events([event for i, event in enumerate(events) if i not in dropped])


def ok_events(events: list[tuple[str | None, Any]]) -> Any:
    return stream_answer(sse(events))


async def test_a_tool_call_cut_off_by_the_output_limit_is_left_out_and_named() -> None:
    for stop, ours, keep in [
        ("max_tokens", "max_tokens", 1),
        ("max_tokens", "max_tokens", 0),  # cut before any of its input
        ("model_context_window_exceeded", "context_window", 1),
        ("refusal", "refusal", 1),
    ]:
        finished = await collect(
            provider(Script([cut_in_tool_input(stop, keep)])), simple_request()
        )
        assert (finished.stop, finished.cut_tool) == (ours, "zoom")
        assert finished.parts == [Text("Let me look.")]


async def test_a_whole_tool_call_at_the_output_limit_is_kept() -> None:
    finished = await collect(
        provider(Script([cut_in_tool_input("max_tokens", 2)])), simple_request()
    )
    assert finished.stop == "max_tokens" and finished.cut_tool is None
    assert finished.tool_uses == [ToolUse("toolu_1", "zoom", {"id": 4})]


async def test_invalid_tool_input_without_a_limit_is_a_server_error() -> None:
    with pytest.raises(ProviderError) as info:
        await collect(provider(Script([cut_in_tool_input("tool_use")])), simple_request())
    assert info.value.kind == "server" and "invalid JSON" in str(info.value)


async def test_rate_limit_then_success_through_sdk_retries() -> None:
    limited = error_answer(
        429,
        {"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}},
        {"retry-after-ms": "1"},
    )
    script = Script([limited, limited, ok()])
    finished = await collect(provider(script, max_retries=2), simple_request())
    assert finished.text == "hi"
    assert len(script.requests) == 3
    assert script.requests[0].raw == script.requests[2].raw


async def test_the_sdk_retries_nothing_unless_asked() -> None:
    """evertalk's RetryingProvider is the one retry policy: the adapter alone tries once."""
    limited = error_answer(
        429,
        {"type": "error", "error": {"type": "rate_limit_error", "message": "slow down"}},
        {"retry-after-ms": "1"},
    )
    script = Script([limited, ok()])
    with pytest.raises(ProviderError) as info:
        await collect(provider(script), simple_request())
    assert info.value.kind == "rate_limit" and info.value.transient
    assert len(script.requests) == 1


async def test_server_error_after_retries_is_a_server_error() -> None:
    failing = error_answer(
        500,
        {"type": "error", "error": {"type": "api_error", "message": "boom"}},
        {"retry-after-ms": "1"},
    )
    script = Script([failing])
    with pytest.raises(ProviderError) as info:
        await collect(provider(script, max_retries=2), simple_request())
    assert info.value.kind == "server"
    assert info.value.status == 500
    assert len(script.requests) == 3
    assert "boom" in str(info.value)


async def test_overloaded_and_client_errors_are_typed() -> None:
    cases = [
        (529, "overloaded_error", "overloaded"),
        (400, "invalid_request_error", "bad_request"),
        (401, "authentication_error", "auth"),
        (404, "not_found_error", "not_found"),
    ]
    for status, error_type, kind in cases:
        answer = error_answer(
            status,
            {"type": "error", "error": {"type": error_type, "message": "no"}},
            {"retry-after-ms": "1"},
        )
        script = Script([answer])
        with pytest.raises(ProviderError) as info:
            await collect(provider(script, max_retries=1), simple_request())
        assert (info.value.kind, info.value.status) == (kind, status)


async def test_stream_without_message_stop_is_cut() -> None:
    script = Script([ok(finish=False)])
    events: list[Event] = []
    with pytest.raises(ProviderError) as info:
        async for event in provider(script).stream(simple_request()):
            events.append(event)
    assert info.value.kind == "cut"
    assert not any(isinstance(e, Finished) for e in events)
    assert isinstance(events[0], Started)


async def test_stream_broken_mid_way_is_cut() -> None:
    body = sse(anthropic_events([{"type": "text", "text": "a long reply " * 20}]))
    script = Script([stream_answer(body, cut_with=httpx2.RemoteProtocolError("peer closed"))])
    with pytest.raises(ProviderError) as info:
        await collect(provider(script), simple_request())
    assert info.value.kind == "cut"


async def test_error_event_mid_stream_is_typed() -> None:
    events = anthropic_events([{"type": "text", "text": "partial"}], finish=False)[:3]
    events.append(
        ("error", {"type": "error", "error": {"type": "overloaded_error", "message": "x"}})
    )
    script = Script([stream_answer(sse(events))])
    with pytest.raises(ProviderError) as info:
        await collect(provider(script), simple_request())
    assert info.value.kind == "overloaded"


async def test_timeout_and_connection_errors() -> None:
    def timeout(request: httpx2.Request) -> httpx2.Response:
        raise httpx2.ReadTimeout("timed out", request=request)

    def refused(request: httpx2.Request) -> httpx2.Response:
        raise httpx2.ConnectError("refused", request=request)

    for answer, kind in [(timeout, "timeout"), (refused, "connection")]:
        script = Script([answer])
        with pytest.raises(ProviderError) as info:
            await collect(provider(script, max_retries=0), simple_request())
        assert info.value.kind == kind


async def test_api_key_never_appears_in_errors() -> None:
    echo = error_answer(
        401,
        {"type": "error", "error": {"type": "authentication_error", "message": f"bad key {KEY}"}},
    )
    script = Script([echo])
    p = provider(script, max_retries=0)
    with pytest.raises(ProviderError) as info:
        await collect(p, simple_request())
    error = info.value
    text = "".join(traceback.format_exception(error))
    assert KEY not in str(error)
    assert KEY not in repr(error)
    assert KEY not in text
    assert KEY not in repr(p)
    assert error.kind == "auth"
    assert "\n" not in str(error)
    # the key did go out, where it belongs
    assert KEY in script.requests[0].headers.get("authorization", "") + script.requests[
        0
    ].headers.get("x-api-key", "")


async def test_timeout_mid_stream_is_a_timeout() -> None:
    body = sse(anthropic_events([{"type": "text", "text": "slow " * 50}]))
    script = Script([stream_answer(body, cut_with=httpx2.ReadTimeout("read timed out"))])
    with pytest.raises(ProviderError) as info:
        await collect(provider(script), simple_request())
    assert info.value.kind == "timeout"


async def test_leaving_the_stream_early_closes_it_quietly() -> None:
    script = Script([ok([{"type": "text", "text": "a long answer"}])])
    p = provider(script)
    stream = cast(AsyncGenerator[Event, None], p.stream(simple_request()))
    first = await stream.__anext__()
    assert isinstance(first, Started)
    await stream.aclose()  # the consumer stops listening (a cancelled turn)
    assert (await collect(p, simple_request())).text == "a long answer"
    await p.aclose()


async def test_a_failed_response_carries_the_usage_it_reported() -> None:
    usage = anthropic_usage(input_tokens=12, output=1, read=3000, write=200)
    body = sse(anthropic_events([{"type": "text", "text": "a long reply " * 20}], usage=usage))
    script = Script([stream_answer(body, cut_with=httpx2.RemoteProtocolError("peer closed"))])
    with pytest.raises(ProviderError) as info:
        await collect(provider(script), simple_request())
    # the input and cache counts of message_start; the output so far
    assert info.value.kind == "cut"
    assert info.value.usage == Usage(input=12, output=1, cache_read=3000, cache_write=200)
    events = anthropic_events([{"type": "text", "text": "partial"}], usage=usage)[:3]
    events.append(
        ("error", {"type": "error", "error": {"type": "overloaded_error", "message": "x"}})
    )
    with pytest.raises(ProviderError) as info:
        await collect(provider(Script([stream_answer(sse(events))])), simple_request())
    assert info.value.kind == "overloaded" and info.value.usage is not None
    assert info.value.usage.cache_read == 3000
    with pytest.raises(ProviderError) as info:
        await collect(provider(Script([ok(finish=False, usage=usage)])), simple_request())
    assert info.value.kind == "cut"
    assert info.value.usage == Usage(input=12, output=42, cache_read=3000, cache_write=200)


async def test_an_error_before_the_response_carries_no_usage() -> None:
    body = {"type": "error", "error": {"type": "invalid_request_error", "message": "bad"}}
    with pytest.raises(ProviderError) as info:
        await collect(provider(Script([error_answer(400, body)])), simple_request())
    assert info.value.kind == "bad_request" and info.value.usage is None
