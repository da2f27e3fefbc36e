"""The OpenAI-compatible adapter through the real SDK, against an in-process fake
Chat Completions API."""

from __future__ import annotations

import traceback
from typing import Any

import httpx2
import pytest

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
from evertalk.providers.openai import OpenAIProvider

from .fake_http import Script, error_answer, openai_chunk, openai_events, sse, stream_answer

pytestmark = pytest.mark.anyio

KEY = "sk-proj-FAKE-KEY-9876543210-do-not-leak"
TOOLS = [
    Tool("zoom", "Open a line.", {"type": "object", "properties": {"id": {"type": "integer"}}})
]


def provider(
    script: Script, base_url: str = "https://api.openai.com/v1", **kw: Any
) -> OpenAIProvider:
    return OpenAIProvider(KEY, base_url, http_client=script.client(), **kw)


def simple_request(**kwargs: Any) -> Request:
    fields: dict[str, Any] = {
        "model": "gpt-5-mini",
        "system": [Text("You are Ever.")],
        "tools": [],
        "messages": [Message("user", [Text("hello")])],
        "max_tokens": 1000,
    }
    fields.update(kwargs)
    return Request(**fields)


def usage(prompt: int = 100, completion: int = 7, cached: int = 0) -> dict[str, Any]:
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": cached},
    }


def reply(text: str = "hi", finish: str = "stop", **usage_kw: Any) -> list[dict[str, Any]]:
    return [
        openai_chunk({"role": "assistant", "content": ""}),
        openai_chunk({"content": text[:1]}),
        openai_chunk({"content": text[1:]}, finish=finish),
        openai_chunk(usage=usage(**usage_kw)),
    ]


def ok(chunks: list[dict[str, Any]] | None = None, *, done: bool = True) -> Any:
    return stream_answer(sse(openai_events(chunks if chunks is not None else reply(), done=done)))


async def events_of(p: OpenAIProvider, request: Request) -> list[Event]:
    return [event async for event in p.stream(request)]


# --- the request body ------------------------------------------------------------------------


async def test_turn_request_body() -> None:
    script = Script([ok()])
    view = "<chat>\n" + "".join(f"{i}+1|line {i}\n" for i in range(10)) + "</chat>"
    request = turn_request(
        "gpt-5-mini",
        "SYSTEM",
        TOOLS,
        view,
        [Text("header\nhello")],
        [],
        2000,
        effort="high",
        cache_key="chat-1/turn",
    )
    await collect(provider(script), request)
    body = script.requests[0].body
    assert body["model"] == "gpt-5-mini"
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert body["max_completion_tokens"] == 2000
    assert "max_tokens" not in body
    assert body["reasoning_effort"] == "high"
    assert body["prompt_cache_key"] == "chat-1/turn"
    assert body["tool_choice"] == "auto"  # said: some local servers leave tools out otherwise
    assert body["tools"] == [
        {
            "type": "function",
            "function": {
                "name": "zoom",
                "description": "Open a line.",
                "parameters": TOOLS[0].input_schema,
            },
        }
    ]
    # no cache marks anywhere; the view and the tail as one exact string
    assert b"cache_control" not in script.requests[0].raw
    assert body["messages"] == [
        {"role": "system", "content": "SYSTEM"},
        {"role": "user", "content": view + "\nheader\nhello"},
    ]


async def test_compaction_body_and_options_off() -> None:
    script = Script([ok()])
    context = "<chat>\n0+1|a\n</chat>"
    request = compaction_request(
        "qwen3",
        "SYS",
        TOOLS,
        context,
        "Compaction: go",
        [("too long", "again")],
        500,
        cache_key="k",
    )
    await collect(provider(script, "http://localhost:11434/v1", send_cache_key=False), request)
    body = script.requests[0].body
    assert body["tool_choice"] == "none"
    assert body["max_tokens"] == 500
    assert "max_completion_tokens" not in body
    assert "prompt_cache_key" not in body
    assert "reasoning_effort" not in body
    assert body["messages"] == [
        {"role": "system", "content": "SYS"},
        {"role": "user", "content": context + "\nCompaction: go"},
        {"role": "assistant", "content": "too long"},
        {"role": "user", "content": "again"},
    ]


async def test_system_blocks_joined_exactly_and_tool_loop_translated() -> None:
    script = Script([ok()])
    png = Image("image/png", "iVBOR")
    request = simple_request(
        system=[Text("part one\n"), Text("part two", mark=True)],
        messages=[
            Message("user", [Text("look "), Text("here"), png, Text("!")]),
            Message(
                "assistant",
                [
                    Thinking("secret thoughts"),
                    Text("zooming"),
                    ToolUse("call_1", "zoom", {"id": 0}),
                ],
            ),
            Message(
                "user",
                [
                    ToolResult("call_1", [Text("0+1|"), Text("user: hi"), png]),
                    Text("a message typed meanwhile"),
                ],
            ),
        ],
    )
    await collect(provider(script), request)
    messages = script.requests[0].body["messages"]
    url = {"url": "data:image/png;base64,iVBOR"}
    assert messages == [
        {"role": "system", "content": "part one\npart two"},
        {
            "role": "user",
            "content": [
                {"type": "text", "text": "look here"},
                {"type": "image_url", "image_url": url},
                {"type": "text", "text": "!"},
            ],
        },
        {
            "role": "assistant",
            "content": "zooming",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "zoom", "arguments": '{"id":0}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "0+1|user: hi"},
        {
            "role": "user",
            "content": [
                {"type": "image_url", "image_url": url},
                {"type": "text", "text": "a message typed meanwhile"},
            ],
        },
    ]
    assert b"secret thoughts" not in script.requests[0].raw


# --- the reply stream ------------------------------------------------------------------------


async def test_stream_text_thinking_tool_calls_and_usage() -> None:
    chunks = [
        openai_chunk({"role": "assistant", "reasoning_content": "think "}),
        openai_chunk({"reasoning_content": "hard"}),
        openai_chunk({"content": "Let me look."}),
        openai_chunk(
            {
                "tool_calls": [
                    {
                        "index": 0,
                        "id": "call_7",
                        "type": "function",
                        "function": {"name": "zoom", "arguments": '{"id"'},
                    }
                ]
            }
        ),
        openai_chunk({"tool_calls": [{"index": 0, "function": {"arguments": ': 8, "n": 4}'}}]}),
        openai_chunk({}, finish="tool_calls"),
        openai_chunk(usage=usage(prompt=5000, completion=90, cached=4096)),
    ]
    script = Script([ok(chunks)])
    events = await events_of(provider(script), simple_request())
    assert isinstance(events[0], Started)
    assert sum(isinstance(e, Started) for e in events) == 1
    assert "".join(e.text for e in events if isinstance(e, ThinkingDelta)) == "think hard"
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Let me look."
    finished = events[-1]
    assert isinstance(finished, Finished)
    assert finished.parts == [
        Thinking("think hard"),
        Text("Let me look."),
        ToolUse("call_7", "zoom", {"id": 8, "n": 4}),
    ]
    assert finished.stop == "tool_use"
    assert finished.usage == Usage(input=5000 - 4096, output=90, cache_read=4096, cache_write=0)
    assert finished.model == "gpt-5-mini"


def markers(events: list[Event]) -> list[Event | type[Finished]]:
    """The block markers of a stream, in order, with Finished as its type."""
    return [
        Finished if isinstance(e, Finished) else e
        for e in events
        if isinstance(e, TextDone | ToolUseStarted | Finished)
    ]


def call_chunk(index: int, call_id: str, arguments: str) -> dict[str, Any]:
    function = {"name": "zoom", "arguments": arguments}
    call = {"index": index, "id": call_id, "type": "function", "function": function}
    return openai_chunk({"tool_calls": [call]})


async def test_the_text_run_is_announced_when_a_tool_call_begins() -> None:
    chunks = [
        openai_chunk({"role": "assistant", "content": "Let "}),
        openai_chunk({"content": "me look."}),
        call_chunk(0, "call_1", '{"id": 1}'),
        call_chunk(1, "call_2", '{"id": 2}'),
        openai_chunk({}, finish="tool_calls"),
        openai_chunk(usage=usage()),
    ]
    events = await events_of(provider(Script([ok(chunks)])), simple_request())
    assert markers(events) == [
        TextDone("Let me look."),
        ToolUseStarted(),
        ToolUseStarted(),
        Finished,
    ]
    done = events.index(TextDone("Let me look."))
    assert events[done - 1] == TextDelta("me look.")
    finished = events[-1]
    assert isinstance(finished, Finished) and finished.parts[0] == Text("Let me look.")


async def test_the_text_run_is_announced_at_the_finish_reason() -> None:
    events = await events_of(provider(Script([ok(reply("hello"))])), simple_request())
    assert markers(events) == [TextDone("hello"), Finished]
    assert events[-3] == TextDelta("ello")  # the finish_reason came with the last piece


async def test_text_after_a_tool_call_is_a_second_run() -> None:
    chunks = [
        openai_chunk({"content": "Before."}),
        call_chunk(0, "call_1", '{"id": 1}'),
        openai_chunk({"content": "After."}),
        openai_chunk({}, finish="tool_calls"),
        openai_chunk(usage=usage()),
    ]
    events = await events_of(provider(Script([ok(chunks)])), simple_request())
    assert markers(events) == [TextDone("Before."), ToolUseStarted(), TextDone("After."), Finished]
    finished = events[-1]
    assert isinstance(finished, Finished)
    assert finished.parts == [Text("Before."), Text("After."), ToolUse("call_1", "zoom", {"id": 1})]


async def test_an_unfinished_text_run_is_never_announced() -> None:
    script = Script([ok([openai_chunk({"content": "half a rep"})], done=False)])
    events: list[Event] = []
    with pytest.raises(ProviderError) as info:
        async for event in provider(script).stream(simple_request()):
            events.append(event)
    assert info.value.kind == "cut"
    assert TextDelta("half a rep") in events and markers(events) == []


async def test_reasoning_field_variant_is_thinking() -> None:
    chunks = [
        openai_chunk({"reasoning": "via openrouter"}),
        openai_chunk({"content": "done"}, finish="stop"),
        openai_chunk(usage=usage()),
    ]
    script = Script([ok(chunks)])
    finished = await collect(provider(script), simple_request())
    assert finished.parts == [Thinking("via openrouter"), Text("done")]


async def test_finish_reasons_are_mapped() -> None:
    for wire, ours in [
        ("stop", "end_turn"),
        ("length", "max_tokens"),
        ("content_filter", "refusal"),
    ]:
        script = Script([ok(reply(finish=wire))])
        finished = await collect(provider(script), simple_request())
        assert finished.stop == ours


def cut_in_arguments(finish: str, arguments: str = '{"id": ') -> Any:
    return ok(
        [
            openai_chunk({"content": "Let me look."}),
            call_chunk(0, "call_1", '{"id": 1}'),
            call_chunk(1, "call_2", arguments),
            openai_chunk({}, finish=finish),
            openai_chunk(usage=usage()),
        ]
    )


async def test_a_tool_call_cut_off_by_the_output_limit_is_left_out_and_named() -> None:
    for finish, ours, arguments in [
        ("length", "max_tokens", '{"id": '),
        ("length", "max_tokens", ""),  # cut before any of its arguments
        ("content_filter", "refusal", '{"id": '),
    ]:
        script = Script([cut_in_arguments(finish, arguments)])
        finished = await collect(provider(script), simple_request())
        assert (finished.stop, finished.cut_tool) == (ours, "zoom")
        assert finished.parts == [Text("Let me look."), ToolUse("call_1", "zoom", {"id": 1})]


async def test_invalid_arguments_without_a_limit_are_a_server_error() -> None:
    with pytest.raises(ProviderError) as info:
        await collect(provider(Script([cut_in_arguments("tool_calls")])), simple_request())
    assert info.value.kind == "server" and "invalid JSON" in str(info.value)


async def test_stream_without_finish_reason_is_cut() -> None:
    chunks = [openai_chunk({"content": "half a rep"})]
    for done in (True, False):
        script = Script([ok(chunks, done=done)])
        with pytest.raises(ProviderError) as info:
            await collect(provider(script), simple_request())
        assert info.value.kind == "cut"
        assert str(info.value).startswith("the server cut the reply short")


async def test_an_empty_body_is_a_reply_cut_short() -> None:
    """An HTTP 200 with nothing in it: a local server that failed once it had answered."""
    script = Script([stream_answer(b"")])
    with pytest.raises(ProviderError) as info:
        await collect(provider(script, name="llamacpp"), simple_request())
    assert info.value.kind == "cut" and info.value.transient and info.value.usage is None
    assert "the prompt exceeded its context" in str(info.value)
    assert "--ctx-size" in str(info.value) and "--n_ctx" in str(info.value)


async def test_a_500_whose_body_is_a_validation_error_is_a_refused_request() -> None:
    detail = (
        "2 validation errors for ChatCompletionRequestAssistantMessage\ncontent\n"
        "  Input should be a valid string"
    )
    refused = error_answer(500, {"error": {"message": detail, "type": "internal_server_error"}})
    plain = error_answer(500, {"error": {"message": "out of memory", "type": "server_error"}})
    script = Script([refused, plain])
    with pytest.raises(ProviderError) as info:
        await collect(provider(script), simple_request())
    assert (info.value.kind, info.value.status, info.value.transient) == ("bad_request", 500, False)
    assert "2 validation errors for" in str(info.value) and "\n" not in str(info.value)
    with pytest.raises(ProviderError) as info:
        await collect(provider(script), simple_request())
    assert (info.value.kind, info.value.status, info.value.transient) == ("server", 500, True)


async def test_stream_broken_mid_way_is_cut() -> None:
    body = sse(openai_events(reply(text="x" * 400)))
    script = Script([stream_answer(body, cut_with=httpx2.RemoteProtocolError("peer closed"))])
    with pytest.raises(ProviderError) as info:
        await collect(provider(script), simple_request())
    assert info.value.kind == "cut"


async def test_error_object_mid_stream_is_typed() -> None:
    chunks: list[dict[str, Any]] = [openai_chunk({"content": "par"})]
    events = [
        *openai_events(chunks, done=False),
        (None, {"error": {"message": "upstream overloaded", "code": 502}}),
    ]
    script = Script([stream_answer(sse(events))])
    with pytest.raises(ProviderError) as info:
        await collect(provider(script), simple_request())
    assert info.value.kind == "server"
    assert "upstream overloaded" in str(info.value)


async def test_rate_limit_then_success_through_sdk_retries() -> None:
    limited = error_answer(
        429, {"error": {"message": "slow down", "type": "rate_limit"}}, {"retry-after-ms": "1"}
    )
    script = Script([limited, ok()])
    finished = await collect(provider(script, max_retries=1), simple_request())
    assert finished.text == "hi"
    assert len(script.requests) == 2


async def test_the_sdk_retries_nothing_unless_asked() -> None:
    """evertalk's RetryingProvider is the one retry policy: the adapter alone tries once."""
    limited = error_answer(
        429, {"error": {"message": "slow down", "type": "rate_limit"}}, {"retry-after-ms": "1"}
    )
    script = Script([limited, ok()])
    with pytest.raises(ProviderError) as info:
        await collect(provider(script), simple_request())
    assert info.value.kind == "rate_limit" and info.value.transient
    assert len(script.requests) == 1


async def test_server_error_after_retries_is_a_server_error() -> None:
    failing = error_answer(503, {"error": {"message": "unavailable"}}, {"retry-after-ms": "1"})
    script = Script([failing])
    with pytest.raises(ProviderError) as info:
        await collect(provider(script, max_retries=3), simple_request())
    assert (info.value.kind, info.value.status) == ("server", 503)
    assert str(info.value) == "OpenAI: unavailable"
    assert len(script.requests) == 4


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
        401, {"error": {"message": f"Incorrect API key provided: {KEY}", "code": "invalid_api_key"}}
    )
    script = Script([echo])
    p = provider(script, max_retries=0)
    with pytest.raises(ProviderError) as info:
        await collect(p, simple_request())
    error = info.value
    assert error.kind == "auth"
    assert KEY not in str(error)
    assert KEY not in repr(error)
    assert KEY not in "".join(traceback.format_exception(error))
    assert KEY not in repr(p)
    assert script.requests[0].headers["authorization"] == f"Bearer {KEY}"


def test_missing_key_is_an_auth_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_ADMIN_KEY", raising=False)
    with pytest.raises(ProviderError) as info:
        OpenAIProvider(None, None)
    assert info.value.kind == "auth"


async def test_timeout_mid_stream_is_a_timeout() -> None:
    body = sse(openai_events(reply(text="y" * 400)))
    script = Script([stream_answer(body, cut_with=httpx2.ReadTimeout("read timed out"))])
    with pytest.raises(ProviderError) as info:
        await collect(provider(script), simple_request())
    assert info.value.kind == "timeout"


async def test_usage_with_cache_writes_reported() -> None:
    chunks = [
        openai_chunk({"content": "ok"}, finish="stop"),
        openai_chunk(
            usage={
                "prompt_tokens": 1000,
                "completion_tokens": 5,
                "total_tokens": 1005,
                "prompt_tokens_details": {"cached_tokens": 600, "cache_write_tokens": 300},
            }
        ),
    ]
    script = Script([ok(chunks)])
    finished = await collect(provider(script), simple_request())
    assert finished.usage == Usage(input=100, output=5, cache_read=600, cache_write=300)


async def test_a_stream_without_its_usage_chunk_has_unknown_usage() -> None:
    # many compatible local servers ignore `stream_options.include_usage`: not an error
    finished = await collect(provider(Script([ok(reply()[:-1])])), simple_request())
    assert finished.text == "hi" and finished.stop == "end_turn"
    assert finished.usage == Usage(reported=False)
    reported = await collect(provider(Script([ok()])), simple_request())
    assert reported.usage == Usage(input=100, output=7) and reported.usage.reported
    assert not (reported.usage + finished.usage).reported


def timed(timings: dict[str, Any], **usage_kw: Any) -> list[dict[str, Any]]:
    """A reply whose finish chunk carries a llama.cpp server's `timings` (and a usage chunk
    only when `usage_kw` is given)."""
    last = openai_chunk({}, finish="stop")
    last["timings"] = timings
    chunks = [openai_chunk({"content": "hi"}), last]
    return chunks + ([openai_chunk(usage=usage(**usage_kw))] if usage_kw else [])


async def test_llamacpp_timings_are_the_usage_when_none_is_sent() -> None:
    timings = {"cache_n": 96, "prompt_n": 20, "prompt_ms": 8.5, "predicted_n": 7}
    finished = await collect(provider(Script([ok(timed(timings))])), simple_request())
    assert finished.usage == Usage(input=20, output=7, cache_read=96)
    assert finished.usage.reported
    # a server's own usage object wins over its timings
    both = await collect(
        provider(Script([ok(timed(timings, prompt=500, completion=9))])), simple_request()
    )
    assert both.usage == Usage(input=500, output=9)


@pytest.mark.parametrize(
    "timings",
    [
        {"prompt_n": 20},  # no output count
        {"predicted_n": 7},  # no prompt count
        {"prompt_n": "20", "predicted_n": 7},
        {"prompt_n": 20, "predicted_n": -1},
        {"prompt_n": 20, "predicted_n": 7, "cache_n": True},
        {"prompt_n": 20.5, "predicted_n": 7},
    ],
)
async def test_timings_that_are_not_counts_leave_the_usage_unknown(timings: Any) -> None:
    finished = await collect(provider(Script([ok(timed(timings))])), simple_request())
    assert finished.usage == Usage(reported=False)


async def test_a_broken_stream_carries_the_usage_reported_before_it() -> None:
    body = sse(openai_events(reply(text="x" * 400)))
    script = Script([stream_answer(body, cut_with=httpx2.RemoteProtocolError("peer closed"))])
    with pytest.raises(ProviderError) as info:
        await collect(provider(script), simple_request())
    assert info.value.kind == "cut" and info.value.usage is None  # no usage chunk yet
    # a server that sends the usage but never a finish_reason
    chunks = [openai_chunk({"content": "half"}), openai_chunk(usage=usage(prompt=50))]
    with pytest.raises(ProviderError) as info:
        await collect(provider(Script([ok(chunks)])), simple_request())
    assert info.value.kind == "cut" and info.value.usage == Usage(input=50, output=7)
    # an error before the response began: nothing was used
    script = Script([error_answer(400, {"error": {"message": "bad"}})])
    with pytest.raises(ProviderError) as info:
        await collect(provider(script), simple_request())
    assert info.value.kind == "bad_request" and info.value.usage is None
