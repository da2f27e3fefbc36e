"""A bad hour at the provider does not fail turns: a turn tries a transient error again for as
long as a person would wait, a reply that broke off midway starts over (what it showed is
marked as replaced), only a whole reply is logged, and a cancel during a wait ends the turn at
once. The agent runs in this process on the real SDKs against the fake, as evertalk makes its
providers (our retries on, fast)."""

from __future__ import annotations

import random
from dataclasses import replace
from pathlib import Path

import pytest
from test_retry import opened
from test_turn_support import collect_turn, log_of, script

from evertalk.protocol.events import AgentEvent, ReplyLogged, Retrying, TextDelta, TurnEnded
from fakes import AnthropicFake, Fail, Reply, ToolCall, chat, reply
from fakes.behaviours import Behaviour, Call, Outcome, cut, summarizer

pytestmark = pytest.mark.anyio


ANSWER = "The backups run at noon every day, and their logs go to the folder named backups."
"""Long enough to stream in several pieces (the fake sends 24 characters a delta)."""


def bad_hour(inner: Behaviour, seed: int) -> Behaviour:
    """One try in five is a 529 overloaded; of the others, about one in six breaks off midway
    through the reply: after some of its text, or after its text block ended."""
    draw = random.Random(seed)

    def behave(call: Call) -> Outcome:
        roll = draw.random()
        if roll < 0.2:
            return Fail(529, retry_after_ms=None)
        outcome = inner(call)
        if roll < 0.33 and isinstance(outcome, Reply):
            # Anthropic: message_start, block start, ping, 4 deltas, block stop, message_delta
            return replace(outcome, cut_after=draw.randint(4, 9))
        return outcome

    return behave


async def test_a_hundred_turns_in_a_bad_hour_fail_none(home: Path) -> None:
    fake = AnthropicFake(script(bad_hour(summarizer(100), seed=7)))
    fake.behaviour.default = bad_hour(chat(ANSWER), seed=36)  # type: ignore[attr-defined]
    seen: list[AgentEvent] = []
    async with opened(home, fake) as agent:
        for n in range(100):
            agent.submit(f"where do the backups go? ({n})")
            seen += await collect_turn(agent)
    ended = [event for event in seen if isinstance(event, TurnEnded)]
    assert len(ended) == 100
    assert [event.error for event in ended if event.reason != "done"] == []
    replaced = sum(isinstance(event, Retrying) and event.replaces for event in seen)
    assert replaced > 5  # replies did break off midway, and were started over
    logged = log_of(home)
    assert [kind for kind, _ in logged] == ["user", "ever"] * 100
    assert {text for kind, text in logged if kind == "ever"} == {ANSWER}  # whole, never cut


DATE = ToolCall("date", {"id": 0})


async def test_a_reply_that_broke_off_after_its_text_is_logged_once_and_its_tool_runs_once(
    home: Path,
) -> None:
    """The text block had ended when the stream broke off, in the tool call that followed:
    the reply starts over, the text is logged once (after the whole reply came), and the tool
    runs once, after it."""
    # message_start, the text block's start, a ping, its one delta, its stop: then the cut
    cut_after_text = reply("Let me look.", DATE, cut_after=5)
    fake = AnthropicFake(script().push(cut_after_text, reply("Let me look.", DATE), chat("0.")))
    async with opened(home, fake) as agent:
        agent.submit("when did I write this?")
        seen = await collect_turn(agent)
    assert seen[-1] == TurnEnded("done")
    (retried,) = [event for event in seen if isinstance(event, Retrying)]
    assert retried.replaces and retried.why == "the reply stream broke off"
    assert not any(isinstance(event, ReplyLogged) for event in seen[: seen.index(retried)])
    shown = [event.text for event in seen if isinstance(event, TextDelta)]
    assert shown == ["Let me look.", "Let me look.", "0."]  # shown again, after the retry
    assert [event.text for event in seen if isinstance(event, ReplyLogged)] == [
        "Let me look.",
        "0.",
    ]
    assert [kind for kind, _ in log_of(home)] == ["user", "ever", "tool", "echo", "ever"]


async def test_a_cancel_during_a_wait_ends_the_turn_at_once(home: Path) -> None:
    """The first try breaks off in its text, the second is told to come back in a minute:
    Esc or Ctrl+C during that wait ends the turn now, and nothing of the replaced try is
    logged."""
    long_wait = Fail(429, retry_after_ms=60_000)
    fake = AnthropicFake(script().push(cut(chat(ANSWER), after_events=5), long_wait))
    async with opened(home, fake) as agent:
        waits: list[Retrying] = []

        def on(event: AgentEvent) -> None:
            if isinstance(event, Retrying):
                waits.append(event)
                if event.delay > 10:
                    agent.cancel()

        agent.submit("where do the backups go?")
        # half the minute asked for: a turn that sat the wait out would not end within it
        seen = await collect_turn(agent, on=on, timeout=30)
    assert seen[-1] == TurnEnded("cancelled")
    assert [(w.replaces, w.delay) for w in waits] == [(True, waits[0].delay), (False, 60.0)]
    assert log_of(home) == [
        ("user", "where do the backups go?"),
        ("echo", "turn stopped: cancelled by the user"),
    ]
