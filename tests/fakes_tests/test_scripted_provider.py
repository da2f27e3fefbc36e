"""The scripted Provider: replies, tool calls and errors played in the order a test queued
them, each as the events the Provider interface promises, and every request kept."""

from __future__ import annotations

import pytest

from evertalk.providers.base import (
    Finished,
    Message,
    Provider,
    ProviderError,
    Request,
    Started,
    Text,
    TextDelta,
    TextDone,
    Thinking,
    ThinkingDelta,
    ToolUse,
    ToolUseStarted,
    Usage,
    collect,
)
from fakes.scripted_provider import (
    ScriptedProvider,
    ScriptExhausted,
    cut,
    fails,
    says,
    thinks,
    uses,
)

pytestmark = pytest.mark.anyio


def ask(text: str = "when?") -> Request:
    return Request("scripted-model", [Text("S")], [], [Message("user", [Text(text)])], 100)


async def events_of(provider: Provider, request: Request) -> list[object]:
    return [event async for event in provider.stream(request)]


def test_it_is_a_provider() -> None:
    provider: Provider = ScriptedProvider()  # mypy checks the interface
    assert provider.name == "anthropic"


async def test_a_text_reply_streams_as_the_interface_says() -> None:
    provider = ScriptedProvider(says("Tuesday.", usage=Usage(12, 3)))
    events = await events_of(provider, ask())
    assert events == [
        Started(),
        TextDelta("Tuesday."),
        TextDone("Tuesday."),
        Finished([Text("Tuesday.")], "end_turn", Usage(12, 3), "scripted-model"),
    ]


async def test_replies_come_in_the_order_queued_and_requests_are_kept() -> None:
    provider = ScriptedProvider(says("one"))
    provider.queue(says("two"), says("three"))
    texts = [(await collect(provider, ask(f"q{n}"))).text for n in range(3)]
    assert texts == ["one", "two", "three"]
    assert [r.messages[0].parts for r in provider.requests] == [
        [Text("q0")],
        [Text("q1")],
        [Text("q2")],
    ]
    assert provider.pending == 0


async def test_a_tool_call_stops_for_the_tool() -> None:
    provider = ScriptedProvider(uses("date", {"tz": "UTC"}, text="Let me look.", id="t1"))
    events = await events_of(provider, ask())
    finished = events[-1]
    assert isinstance(finished, Finished) and finished.stop == "tool_use"
    assert finished.parts == [Text("Let me look."), ToolUse("t1", "date", {"tz": "UTC"})]
    assert ToolUseStarted() in events
    assert events.index(TextDone("Let me look.")) < events.index(ToolUseStarted())


async def test_thoughts_stream_before_the_text() -> None:
    provider = ScriptedProvider(thinks("hmm", then="Yes."))
    events = await events_of(provider, ask())
    assert events[1] == ThinkingDelta("hmm")
    finished = events[-1]
    assert isinstance(finished, Finished) and finished.parts == [Thinking("hmm"), Text("Yes.")]


async def test_an_error_before_the_response_begins() -> None:
    provider = ScriptedProvider(fails("overloaded", "server overloaded", 529), says("ok"))
    with pytest.raises(ProviderError) as raised:
        await events_of(provider, ask())
    assert raised.value.kind == "overloaded" and raised.value.status == 529
    assert raised.value.transient
    assert (await collect(provider, ask())).text == "ok"


async def test_an_error_after_the_response_began_keeps_its_usage() -> None:
    provider = ScriptedProvider(fails("server", "boom", 500, begun=True, usage=Usage(40)))
    seen: list[object] = []
    with pytest.raises(ProviderError) as raised:
        async for event in provider.stream(ask()):
            seen.append(event)
    assert seen == [Started(Usage(40))]
    assert raised.value.usage == Usage(40)


async def test_a_cut_stream_is_an_error_never_a_short_reply() -> None:
    provider = ScriptedProvider(cut("half a rep"))
    with pytest.raises(ProviderError) as raised:
        await collect(provider, ask())
    assert raised.value.kind == "cut"


async def test_a_reply_can_be_computed_from_the_request() -> None:
    provider = ScriptedProvider(lambda request: says(f"{len(request.messages)} message"))
    assert (await collect(provider, ask())).text == "1 message"


async def test_an_empty_script_says_so_unless_it_has_a_default() -> None:
    provider = ScriptedProvider()
    with pytest.raises(ScriptExhausted):
        await collect(provider, ask())
    provider.default = says("again")
    assert [(await collect(provider, ask())).text for _ in range(2)] == ["again", "again"]


async def test_aclose_is_recorded() -> None:
    provider = ScriptedProvider()
    await provider.aclose()
    assert provider.closed
