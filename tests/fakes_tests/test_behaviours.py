"""Scripted behaviours: their replies through the real SDKs, and how they compose."""

from __future__ import annotations

import time
from typing import Any

import anthropic
import pytest

from fakes import (
    AnthropicFake,
    Call,
    Fail,
    OpenAIFake,
    Reply,
    Script,
    anthropic_async,
    calls_tool,
    chat,
    empty,
    fail,
    fenced,
    never_shortens,
    openai_async,
    sequence,
    sized_line,
    slow,
    summarizer,
    thinking_only,
    with_head,
)
from fakes.behaviours import cut_at_start, flaky, overloaded

pytestmark = pytest.mark.anyio

TASK = (
    "Compaction: merge the adjacent lines 40+4 and 44+4 into one line.\n"
    + "-" * 512
    + "\n<input>\n40+4|Ever and the user planned the tree; naïve merges cost too much.\n"
    "44+4|They chose batches of merges — 128 kB down to 64 kB.\n</input>"
)
FIRST: Any = {"role": "user", "content": TASK}


def user(content: str) -> dict[str, Any]:
    return {"role": "user", "content": content}


def call(*messages: Any, api: str = "anthropic") -> Call:
    return Call(api, {"model": "m", "messages": list(messages)}, index=0)  # type: ignore[arg-type]


def text_of(outcome: Reply | Fail) -> str:
    assert isinstance(outcome, Reply)
    return outcome.text


@pytest.mark.parametrize("size", [1, 7, 100, 511, 512, 600, 2000])
def test_sized_line_has_exactly_the_bytes_asked_for(size: int) -> None:
    line = sized_line("naïve — words ü 40+4|and more words", size)
    assert len(line.encode()) == size
    assert "\n" not in line and line == line.strip() and not line.startswith("40+4|")


def test_summarizer_uses_the_input_and_the_attempt_number() -> None:
    behave = summarizer([600, 480])
    first = text_of(behave(call(FIRST)))
    assert len(first.encode()) == 600 and first.startswith("Ever and the user planned")
    follow_up: Any = [
        FIRST,
        {"role": "assistant", "content": first},
        {"role": "user", "content": "Too long."},
    ]
    assert len(text_of(behave(call(*follow_up))).encode()) == 480
    third = [
        *follow_up,
        {"role": "assistant", "content": "x"},
        {"role": "user", "content": "Again."},
    ]
    assert len(text_of(behave(call(*third))).encode()) == 480  # the last entry repeats
    assert len(text_of(summarizer(lambda attempt: 100 * attempt)(call(*third))).encode()) == 300
    assert text_of(never_shortens()(call(*third))) == text_of(never_shortens()(call(FIRST)))


def test_heads_and_fences() -> None:
    assert text_of(with_head(summarizer(50))(call(FIRST))).startswith("40+4|Ever and")
    assert text_of(with_head(chat("x"), head="7+1|")(call(FIRST))) == "7+1|x"
    assert text_of(fenced(chat("a line"))(call(FIRST))) == "```\na line\n```"


def test_fail_counts_per_request_then_defers() -> None:
    behave = fail(529, times=2, then=chat("ok"))
    other: Any = {"role": "user", "content": "another request"}
    outcomes = [behave(call(FIRST)) for _ in range(3)] + [behave(call(other))]
    assert [type(o).__name__ for o in outcomes] == ["Fail", "Fail", "Reply", "Fail"]
    assert isinstance(outcomes[0], Fail) and outcomes[0].status == 529


def test_flaky_fails_each_request_by_its_pattern_then_answers() -> None:
    behave = flaky(chat("ok"), (overloaded, cut_at_start), ())
    other: Any = {"role": "user", "content": "another request"}
    first = [behave(call(FIRST)) for _ in range(3)]
    assert isinstance(first[0], Fail) and first[0].status == 529 and first[0].retry_after_ms is None
    assert isinstance(first[1], Reply) and first[1].cut_after == 1
    assert isinstance(first[2], Reply) and first[2].cut_after is None and first[2].text == "ok"
    assert text_of(behave(call(other))) == "ok"  # the second request takes the empty pattern
    third: Any = {"role": "user", "content": "a third request"}
    assert isinstance(behave(call(third)), Fail)  # the patterns cycle


def test_script_routes_then_queue_then_default() -> None:
    script = Script(chat("default"))
    script.route(lambda c: "Compaction:" in c.last_user_text, summarizer(40))
    script.push(chat("one-shot"), Fail(500))
    plain: Any = {"role": "user", "content": "hello"}
    assert len(text_of(script(call(FIRST))).encode()) == 40
    assert text_of(script(call(plain))) == "one-shot"
    assert isinstance(script(call(plain)), Fail)
    assert text_of(script(call(plain))) == "default"
    assert len(script.calls) == 4


def test_sequence_takes_one_behaviour_per_call() -> None:
    behave = sequence(chat("a"), chat("b"))
    assert [text_of(behave(call(FIRST))) for _ in range(3)] == ["a", "b", "b"]


async def test_summarizer_size_loop_through_the_sdk() -> None:
    client = anthropic_async(AnthropicFake(summarizer([600, 480], thinking="Counting...")))
    first = await client.messages.create(model="m", max_tokens=900, messages=[FIRST])
    assert [b.type for b in first.content] == ["thinking", "text"]
    line = first.content[1]
    assert line.type == "text" and len(line.text.encode()) == 600
    follow_up: Any = [
        FIRST,
        {"role": "assistant", "content": [{"type": "text", "text": line.text}]},
        {"role": "user", "content": "That line has 600 bytes; the limit is 512."},
    ]
    second = await client.messages.create(model="m", max_tokens=900, messages=follow_up)
    await client.close()
    assert second.content[1].type == "text" and len(second.content[1].text.encode()) == 480


@pytest.mark.parametrize(
    ("behaviour", "kinds"), [(empty(), []), (thinking_only(), ["thinking"]), (summarizer(0), [])]
)
async def test_empty_and_thinking_only_replies(behaviour: Any, kinds: list[str]) -> None:
    client = anthropic_async(AnthropicFake(behaviour))
    async with client.messages.stream(model="m", max_tokens=50, messages=[FIRST]) as stream:
        message = await stream.get_final_message()
    await client.close()
    assert [b.type for b in message.content] == kinds and message.stop_reason == "end_turn"


async def test_slow_replies_wait_before_starting() -> None:
    client = anthropic_async(AnthropicFake(slow(0.3, chat("late"))))
    began = time.monotonic()
    await client.messages.create(model="m", max_tokens=5, messages=[FIRST])
    await client.close()
    assert time.monotonic() - began >= 0.3


async def test_slow_errors_wait_too() -> None:
    fake = AnthropicFake(slow(0.2, fail(529)))
    client = anthropic_async(fake, max_retries=0)
    began = time.monotonic()
    with pytest.raises(anthropic.OverloadedError):
        await client.messages.create(model="m", max_tokens=5, messages=[FIRST])
    await client.close()
    assert time.monotonic() - began >= 0.2


async def test_a_tool_loop_through_the_anthropic_sdk() -> None:
    client = anthropic_async(AnthropicFake(calls_tool("zoom", {"line": "40+4"}, then="Found.")))
    first = await client.messages.create(model="m", max_tokens=50, messages=[FIRST])
    tool = first.content[-1]
    assert first.stop_reason == "tool_use" and tool.type == "tool_use"
    result = {"type": "tool_result", "tool_use_id": tool.id, "content": "40+2|...\n42+2|..."}
    messages: Any = [
        FIRST,
        {"role": "assistant", "content": [b.model_dump(exclude_none=True) for b in first.content]},
        {"role": "user", "content": [result]},
    ]
    second = await client.messages.create(model="m", max_tokens=50, messages=messages)
    await client.close()
    assert second.content[0].type == "text" and second.content[0].text == "Found."


async def test_one_script_serves_both_fakes() -> None:
    script = Script(summarizer(120))
    anthropic_client = anthropic_async(AnthropicFake(script))
    openai_client = openai_async(OpenAIFake(script))
    message = await anthropic_client.messages.create(model="m", max_tokens=50, messages=[FIRST])
    completion = await openai_client.chat.completions.create(model="m", messages=[FIRST])
    await anthropic_client.close()
    await openai_client.close()
    assert message.content[0].type == "text"
    assert message.content[0].text == completion.choices[0].message.content
    assert [c.api for c in script.calls] == ["anthropic", "openai"]
