"""`/retry` in the terminal app, and the row that says a model call is tried again: the real
Agent on a provider made as evertalk makes it (ours retries, the SDK's do not), the in-process
fake."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
from textual.pilot import Pilot
from tui_support import (
    API_KEY,
    agent_of,
    app_of,
    enter_line,
    log_of,
    outputs,
    script,
    wait_until,
    workdir_of,
)
from tui_support import running as app_running

from evertalk.agent.session import Agent
from evertalk.providers.factory import make_provider
from evertalk.providers.retry import RetryPolicy
from evertalk.service.server import AgentOpener, Service
from evertalk.slash import RETRY_HINT
from evertalk.tui.app import ChatApp
from evertalk.tui.widgets import NoteRow, OutputRow, ReplyView
from fakes import IN_PROCESS_URL, AnthropicFake, Fail, async_client
from fakes import chat as answer
from fakes.behaviours import cut_in_text, flaky, overloaded

pytestmark = pytest.mark.anyio


SHORT = RetryPolicy(base_delay=0.001)


def opener(home: Path, fake: AnthropicFake, policy: RetryPolicy = SHORT) -> AgentOpener:
    """The service's agent on the fake, with a retry policy of short delays (or `policy`)."""

    @asynccontextmanager
    async def open_agent(service: Service) -> AsyncIterator[Agent]:
        client = async_client(fake.app)
        provider = make_provider("anthropic", API_KEY, IN_PROCESS_URL, client, retry=policy)
        try:
            async with Agent.open(
                home, asker=service, provider=provider, workdir=workdir_of(home)
            ) as agent:
                yield agent
        finally:
            await provider.aclose()

    return open_agent


@asynccontextmanager
async def running(home: Path, fake: AnthropicFake) -> AsyncIterator[Pilot[int]]:
    async with app_running(home, fake, opener=opener(home, fake)) as pilot:
        yield pilot


def notes(app: ChatApp) -> list[str]:
    return [row.text for row in app.query(NoteRow)]


def replies(app: ChatApp) -> list[str]:
    """The replies the chat shows (a reply replaced by another try's is hidden)."""
    return [view.source for view in app.query(ReplyView) if view.display]


async def test_retry_answers_the_failed_message_without_sending_it_twice(home: Path) -> None:
    fake = AnthropicFake(script().push(Fail(400, "prompt is too odd"), answer("Done.")))
    async with running(home, fake) as pilot:
        app = app_of(pilot)
        await enter_line(pilot, "rename the backups")
        await wait_until(pilot, lambda: RETRY_HINT in notes(app))
        assert "error: the model call failed: Anthropic: prompt is too odd" in notes(app)
        await enter_line(pilot, "/retry")
        await wait_until(pilot, lambda: replies(app)[-1:] == ["Done."])
        assert outputs(app) == ["trying the turn again for message 0"]
        await wait_until(pilot, lambda: not agent_of(app).busy)
        await enter_line(pilot, "/retry")
        await wait_until(pilot, lambda: len(outputs(app)) == 2)
        assert outputs(app)[-1].startswith("nothing to retry: the last message has a reply")
        assert app.query(OutputRow).last().has_class("error")
    assert [kind for kind, _ in log_of(home)] == ["user", "echo", "ever"]


async def test_a_call_tried_again_is_said_in_the_chat(home: Path) -> None:
    fake = AnthropicFake(script())
    fake.behaviour.default = flaky(answer("Here."), (overloaded,))  # type: ignore[attr-defined]
    async with running(home, fake) as pilot:
        app = app_of(pilot)
        await enter_line(pilot, "hello")
        await wait_until(pilot, lambda: replies(app)[-1:] == ["Here."])
        retrying = [text for text in notes(app) if text.startswith("retrying (2/10) ")]
        assert len(retrying) == 1 and retrying[0].endswith(" s: server overloaded (529)")
        assert RETRY_HINT not in notes(app)


async def test_a_reply_that_broke_off_midway_is_replaced_by_the_whole_one(home: Path) -> None:
    whole = "The backups run at noon, and their logs go to the folder named backups."
    fake = AnthropicFake(script())
    fake.behaviour.default = flaky(answer(whole), (cut_in_text,))  # type: ignore[attr-defined]
    async with running(home, fake) as pilot:
        app = app_of(pilot)
        await enter_line(pilot, "where do the backups go?")
        await wait_until(pilot, lambda: not agent_of(app).busy and replies(app)[-1:] == [whole])
        assert replies(app) == [whole]
        assert len(app.query(ReplyView)) == 2  # the broken one, hidden
        retrying = [text for text in notes(app) if text.startswith("retrying (2/10) ")]
        assert len(retrying) == 1
        assert retrying[0].endswith(" s: the reply stream broke off; the reply starts over")
    assert log_of(home) == [("user", "where do the backups go?"), ("ever", whole)]


async def test_the_wait_for_the_next_try_counts_down_and_esc_stops_the_turn(home: Path) -> None:
    fake = AnthropicFake(script())
    busy = Fail(529, retry_after_ms=30_000)  # the server says when to come back: in 30 s
    fake.behaviour.default = flaky(answer("Too late."), (lambda call, inner: busy,))  # type: ignore[attr-defined]
    default_delays = opener(home, fake, RetryPolicy())  # the fake asks for 30 s
    async with app_running(home, fake, opener=default_delays) as pilot:
        app = app_of(pilot)
        await enter_line(pilot, "hello")

        def counting() -> list[str]:
            return [text for text in notes(app) if text.startswith("retrying (2/10) in ")]

        await wait_until(pilot, lambda: bool(counting()))
        first = counting()[0]
        assert first.endswith(": server overloaded (529); Ctrl+C or Esc stops the turn")
        await wait_until(pilot, lambda: counting() and counting()[0] != first)  # it ticks
        await pilot.press("escape")
        await wait_until(pilot, lambda: not agent_of(app).busy)
        assert "Too late." not in replies(app)
        assert [text for text in notes(app) if text.startswith("retrying (2/10) after 30.0 s")]
    assert log_of(home)[-1][1].startswith("turn stopped: cancelled")
