"""How a turn ends short of its answer (SPEC §6.2–§6.4): a limit reached between two calls leaves
the messages held meanwhile for the next turn; a reply stopped by the output limit, refused or
paused; a cancel. Each stop is said in the log by one `echo`, logged once."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anyio
import pytest
from test_turn_support import (
    bare_loop,
    collect_turn,
    log_of,
    opened,
    records_of,
    script,
    texts,
    turn_bodies,
    workdir_beside,
)

from evertalk.agent.tools import ToolContext
from evertalk.agent.turn import REPLY_CUT, Limits
from evertalk.chat import Chat
from evertalk.memory import Budget
from evertalk.protocol.events import AgentEvent, Delivered, TextDelta, ToolStarted, TurnEnded
from evertalk.providers.anthropic import AnthropicProvider
from evertalk.providers.base import BYTES_PER_TOKEN
from fakes import AnthropicFake, OpenAIFake, ToolCall, reply, slow
from fakes import chat as answer
from providers.fake_http import Script as HttpScript
from providers.fake_http import anthropic_events, sse, stream_answer

pytestmark = pytest.mark.anyio

STEER = "also look at the rotation"
SLOW_TOOL = ToolCall("shell", {"command": "sleep 0.3; echo checked"})


def steer_on_tool(agent: Any) -> Any:
    def on(event: AgentEvent) -> None:
        if isinstance(event, ToolStarted):
            agent.submit(STEER)

    return on


# --- messages held when the turn cannot go on ------------------------------------------------


async def test_a_message_held_when_the_step_limit_ends_the_turn_opens_the_next(
    home: Path,
) -> None:
    fake = AnthropicFake(script().push(reply("Checking.", SLOW_TOOL), answer("Rotation: weekly.")))
    async with opened(home, fake, granted=["shell"], limits=Limits(max_steps=1)) as agent:
        agent.submit("check the backups")
        seen = await collect_turn(agent, turns=2, on=steer_on_tool(agent))
    ends = [e for e in seen if isinstance(e, TurnEnded)]
    assert [e.reason for e in ends] == ["max_steps", "done"]
    assert not any(isinstance(e, Delivered) for e in seen)  # never given to the first turn
    log = log_of(home)
    assert [kind for kind, _ in log] == ["user", "ever", "tool", "echo", "echo", "user", "ever"]
    assert log[4] == ("echo", "turn stopped: it reached 1 model calls")
    assert log[5:] == [("user", STEER), ("ever", "Rotation: weekly.")]
    first, second = turn_bodies(fake)
    assert STEER not in str(first)
    assert texts(second["messages"][0]["content"])[-1].endswith("\n" + STEER)


async def test_a_message_held_when_the_context_budget_ends_the_turn_opens_the_next(
    home: Path,
) -> None:
    big = workdir_beside(home) / "big.txt"  # in the workdir: the sandbox's /tmp is its own
    big.write_text("line of a big file\n" * 2000)  # ~13,000 tokens by estimate: the next call
    slow_read = ToolCall("shell", {"command": f"sleep 0.3; cat {big}"})
    fake = AnthropicFake(script().push(reply(slow_read), answer("Noted.")))
    limits = Limits(max_tokens=1000, context_budget=8_000)
    async with opened(home, fake, granted=["shell"], limits=limits) as agent:
        agent.submit("read the big file")
        seen = await collect_turn(agent, turns=2, on=steer_on_tool(agent))
    assert [e.reason for e in seen if isinstance(e, TurnEnded)] == ["context_full", "done"]
    log = log_of(home)
    assert [text for kind, text in log if kind == "user"] == ["read the big file", STEER]
    assert log[-2:] == [("user", STEER), ("ever", "Noted.")]
    assert log[-3][1].startswith("turn stopped: the next call would need")


# --- the output limit, refusals, pauses ------------------------------------------------------


@pytest.mark.parametrize("api", ["anthropic", "openai"])
async def test_a_reply_stopped_by_the_output_limit_ends_the_turn_and_says_so(
    home: Path, api: str
) -> None:
    cut = reply("The backups run at 02:00 and the", stop="max_tokens")
    fake = (
        AnthropicFake(script().push(cut)) if api == "anthropic" else OpenAIFake(script().push(cut))
    )
    async with opened(home, fake, limits=Limits(max_tokens=1000)) as agent:
        agent.submit("tell me all about the backups")
        seen = await collect_turn(agent)
    ended = seen[-1]
    assert isinstance(ended, TurnEnded) and ended.reason == "max_tokens"
    why = "the reply reached the output limit of 1,000 tokens"
    assert ended.error == why
    assert log_of(home) == [
        ("user", "tell me all about the backups"),
        ("ever", "The backups run at 02:00 and the"),
        ("echo", f"turn stopped: {why}"),
    ]


async def test_whole_tool_calls_of_a_reply_at_the_output_limit_run(home: Path) -> None:
    fake = AnthropicFake(
        script().push(
            reply("Checking.", ToolCall("date", {"id": 0}), stop="max_tokens"), answer("Today.")
        )
    )
    async with opened(home, fake) as agent:
        agent.submit("when?")
        seen = await collect_turn(agent)
    assert isinstance(seen[-1], TurnEnded) and seen[-1].reason == "done"
    assert [kind for kind, _ in log_of(home)] == ["user", "ever", "tool", "echo", "ever"]


def cut_in_a_tool_call() -> HttpScript:
    """A reply that stops at the output limit halfway through its second tool call's input."""
    blocks: list[dict[str, Any]] = [
        {"type": "text", "text": "Let me write both."},
        {"type": "tool_use", "id": "toolu_1", "name": "date", "input": {"id": 0}},
        {
            "type": "tool_use",
            "id": "toolu_2",
            "name": "write",
            "input": {"path": "a", "content": "b"},
        },
    ]
    events = anthropic_events(blocks, stop="max_tokens")
    last_input = max(i for i, (_, data) in enumerate(events) if "partial_json" in str(data))
    return HttpScript([stream_answer(sse(events[:last_input] + events[last_input + 1 :]))])


async def test_a_tool_call_cut_off_by_the_output_limit_is_not_run_and_the_turn_says_why(
    chat: Chat, ctx: ToolContext, tmp_path: Path
) -> None:
    http = cut_in_a_tool_call()
    provider = AnthropicProvider(
        "sk-ant-test", "https://api.example.test", http_client=http.client()
    )
    try:
        ending = await bare_loop(provider, chat, ctx, tmp_path / "images").run(
            "<chat></chat>", "go", 3
        )
    finally:
        await provider.aclose()
    why = (
        "the reply reached the output limit of 16,000 tokens in the middle of a call of write, "
        "whose input is incomplete; its tool calls were not run"
    )
    assert ending.event == TurnEnded("max_tokens", why)
    assert ending.final == "Let me write both."
    logged = [(r.kind, r.text) for r in (chat.store.read_message(i) for i in range(chat.t))]
    assert logged == [("ever", "Let me write both."), ("echo", f"turn stopped: {why}")]
    assert len(http.requests) == 1


@pytest.mark.parametrize("api", ["anthropic", "openai"])
async def test_a_refused_reply_ends_the_turn_with_a_notice(home: Path, api: str) -> None:
    refused = reply("I can't help with that.", ToolCall("date", {"id": 0}), stop="refusal")
    fake = (
        AnthropicFake(script().push(refused))
        if api == "anthropic"
        else OpenAIFake(script().push(refused))
    )
    async with opened(home, fake) as agent:
        agent.submit("do something bad")
        seen = await collect_turn(agent)
    ended = seen[-1]
    assert isinstance(ended, TurnEnded) and ended.reason == "refusal"
    log = log_of(home)
    assert [kind for kind, _ in log] == ["user", "ever", "echo"]  # the call was never run
    assert log[2] == ("echo", f"turn stopped: {ended.error}")
    assert ended.error is not None and "refused" in ended.error and "not run" in ended.error


async def test_a_paused_reply_goes_back_as_is_and_the_turn_goes_on(home: Path) -> None:
    fake = AnthropicFake(script().push(reply("Searching.", stop="pause_turn"), answer("Found it.")))
    async with opened(home, fake) as agent:
        agent.submit("search")
        seen = await collect_turn(agent)
    assert isinstance(seen[-1], TurnEnded) and seen[-1].reason == "done"
    assert log_of(home) == [("user", "search"), ("ever", "Searching."), ("ever", "Found it.")]
    first, second = turn_bodies(fake)
    assert len(second["messages"]) == 2  # the opening, then the paused reply: no user message
    assert texts(second["messages"][0]["content"]) == texts(first["messages"][0]["content"])
    resumed = second["messages"][-1]
    assert resumed["role"] == "assistant"
    assert texts(resumed["content"]) == ["Searching."]


# --- cancel ----------------------------------------------------------------------------------


async def test_a_cancel_while_the_reply_streams_is_logged_once(home: Path) -> None:
    fake = AnthropicFake(script().push(slow(0.05, answer("a long reply " * 200), chunk_delay=0.3)))

    async with opened(home, fake) as agent:

        def cancel_on_text(event: AgentEvent) -> None:
            if isinstance(event, TextDelta):
                agent.cancel()

        agent.submit("tell me everything")
        with anyio.fail_after(5):
            seen = await collect_turn(agent, on=cancel_on_text)
        await agent.wait_idle()
    assert isinstance(seen[-1], TurnEnded) and seen[-1].reason == "cancelled"
    shown = "".join(event.text for event in seen if isinstance(event, TextDelta)).strip()
    assert log_of(home) == [
        ("user", "tell me everything"),
        ("ever", f"{shown}\n\n{REPLY_CUT}cancelled by the user]"),  # what the user saw
        ("echo", "turn stopped: cancelled by the user"),
    ]
    stop = records_of(home)[-1]
    assert stop["key"] == "turn-0-stop"


# --- a small window ----------------------------------------------------------------------------


# (a message no window could answer: test_turn_stops.py)


async def test_a_chat_too_big_for_a_small_window_is_refitted_and_answered(home: Path) -> None:
    """200 messages (22 KB of view) and an 8K window: the views' budgets follow the window, the
    saved views are refitted once, and every turn goes through (before: each was refused)."""
    with Chat.open(home / "chat") as chat:
        for k in range(200):
            chat.append("user" if k % 2 else "ever", f"message {k}: " + "the nightly backup " * 5)
    with (home / "config.toml").open("a") as config:
        config.write("\n[turn]\ncontext_window = 8192\n")
    fake = AnthropicFake(script().push(answer("first"), answer("second")))
    async with opened(home, fake) as agent:
        assert agent.chat.core.budget == Budget.for_window(8_192)
        assert any("budget changed" in warning for warning in agent.chat.warnings)
        for text in ("hello", "and again"):
            agent.submit(text)
            seen = await collect_turn(agent)
            assert [e.reason for e in seen if isinstance(e, TurnEnded)] == ["done"]
    bodies = turn_bodies(fake)
    assert len(bodies) == 2
    assert all(len(json.dumps(body)) < 8_192 * BYTES_PER_TOKEN for body in bodies)
