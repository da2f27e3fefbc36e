"""How a turn that does not simply finish is logged: a reply cut off by a cancel is kept as it
was shown, a stop says who stopped the turn, and a message too long for the model's window is
logged with the reason it got no reply."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from test_turn_support import collect_turn, log_of, opened, script, turn_bodies

from evertalk.agent.retry import find_unanswered
from evertalk.agent.turn import REPLY_CUT, Limits
from evertalk.protocol.events import AgentEvent, TextDelta, ToolStarted, TurnEnded
from evertalk.providers.base import BYTES_PER_TOKEN
from fakes import AnthropicFake, ToolCall, reply, slow
from fakes import chat as answer

pytestmark = pytest.mark.anyio

LONG_REPLY = " ".join(f"word{k}" for k in range(400))


def streaming(text: str) -> AnthropicFake:
    """A fake whose turn reply streams slowly enough to be cut off halfway."""
    return AnthropicFake(script().push(slow(0, answer(text), chunk_delay=0.02)))


async def test_a_cancel_mid_reply_logs_what_was_shown_marked_as_cut_off(home: Path) -> None:
    fake = streaming(LONG_REPLY)
    async with opened(home, fake) as agent:
        deltas = 0

        def on(event: AgentEvent) -> None:
            nonlocal deltas
            if isinstance(event, TextDelta):
                deltas += 1
                if deltas == 3:
                    agent.cancel()

        agent.submit("tell me a long story")
        seen = await collect_turn(agent, on=on)
        shown = "".join(e.text for e in seen if isinstance(e, TextDelta)).strip()
        assert seen[-1] == TurnEnded("cancelled")
        assert shown and len(shown) < len(LONG_REPLY)
        # a reply cut off is no answer: the message can be tried again
        assert find_unanswered(agent.chat, home / "chat" / "images").text == "tell me a long story"
    assert log_of(home) == [
        ("user", "tell me a long story"),
        ("ever", f"{shown}\n\n{REPLY_CUT}cancelled by the user]"),
        ("echo", "turn stopped: cancelled by the user"),
    ]


async def test_a_cancel_while_a_tool_runs_logs_the_texts_shown_after_its_call(
    home: Path,
) -> None:
    call = ToolCall("shell", {"command": "sleep 30"})
    fake = AnthropicFake(script().push(reply("Waiting.", call, "Then I check.")))
    async with opened(home, fake, granted=["shell"]) as agent:

        def on(event: AgentEvent) -> None:
            if isinstance(event, ToolStarted):
                agent.cancel()

        agent.submit("wait a bit")
        await collect_turn(agent, on=on)
    log = log_of(home)
    assert [kind for kind, _ in log] == ["user", "ever", "tool", "echo", "ever"]
    assert log[3][1].startswith("shell: cancelled by the user before it finished")
    assert log[4] == ("ever", f"Then I check.\n\n{REPLY_CUT}cancelled by the user]")


async def test_a_turn_cut_off_by_the_service_stopping_says_so(home: Path) -> None:
    fake = AnthropicFake(script().push(slow(30, answer("never sent"))))
    async with opened(home, fake) as agent:
        agent.submit("a question")
        with anyio.fail_after(10):
            while not turn_bodies(fake):
                await anyio.sleep(0.01)
        agent.closing("the service stopped (signal SIGTERM)")
    assert log_of(home) == [
        ("user", "a question"),
        ("echo", "turn stopped: the service stopped (signal SIGTERM)"),
    ]


async def test_a_message_too_long_for_the_window_is_logged_with_why(home: Path) -> None:
    limits = Limits(max_tokens=1000, context_budget=8_000)
    fake = AnthropicFake(script())
    long = "a line of a long paste\n" * (8_000 * BYTES_PER_TOKEN // 20)
    async with opened(home, fake, limits=limits) as agent:
        agent.submit(long)
        seen = await collect_turn(agent)
    ended = seen[-1]
    assert isinstance(ended, TurnEnded) and ended.reason == "context_full"
    assert "does not fit the model's context window (8,000 tokens)" in str(ended.error)
    log = log_of(home)
    assert "".join(text for kind, text in log if kind == "user") == long
    assert log[-1] == ("echo", f"turn stopped: {ended.error}")
    assert turn_bodies(fake) == []
