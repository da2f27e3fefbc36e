"""A turn on a chat that is behind (an import, a long time offline, a lost tree): its view would
not fit the turn model's window, so the turn waits, visibly, for the summaries that make it fit,
then goes on; if they cannot come in time, it goes on with its oldest messages as coarse lines.
It never fails because the chat is behind. The user can send or cancel meanwhile."""

from __future__ import annotations

import json
import re
import shutil
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from test_turn_support import (
    DAY_ONE,
    bare_loop,
    collect_turn,
    fixed_clock,
    is_compaction,
    log_of,
    provider_for,
    script,
    turn_bodies,
    user_texts,
    workdir_beside,
    write_config,
)

from evertalk.agent.catch_up import PACE_AFTER, PACE_WINDOW, Pace
from evertalk.agent.session import Agent
from evertalk.agent.tools import ToolContext
from evertalk.agent.turn import BYTES_PER_TOKEN, Limits
from evertalk.chat import Chat
from evertalk.memory.text import LINE_LIMIT
from evertalk.protocol.events import (
    AgentEvent,
    CatchingUp,
    MemoryWarning,
    Settling,
    TurnEnded,
    TurnStarted,
)
from fakes import AnthropicFake, Call, Script, ToolCall, reply, sized_line, slow, summarizer
from fakes import chat as answer
from fakes.behaviours import Outcome

pytestmark = pytest.mark.anyio

MESSAGES = 128
"""Messages of a chat that is behind: free leaves as large as they get (518 bytes a line, with
its head), so its view of 66 KB is whole text and no line can merge without a summary."""

WINDOW = Limits(max_tokens=1_000, context_budget=12_000)
"""A window in which about 26 KB of view fit: well under the 66 KB of the chat's view."""

NEVER = 3600.0  # seconds: summaries that do not come while a test runs
COARSE = re.compile(r"^(\d+)\+(\d+)\|\[not yet summarized: messages (\d+)–(\d+)\]$", re.MULTILINE)


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A home whose chat was logged with no compactor running: only free nodes built. Made once
    (each message is an fsync or three) and copied for each test."""
    home = tmp_path_factory.mktemp("behind") / "home"
    write_config(home)
    with Chat.open(home / "chat") as chat:
        for i in range(MESSAGES):
            chat.append("user", sized_line(f"note {i} on the backups", LINE_LIMIT - len("user: ")))
    return home


@pytest.fixture
def home(tmp_path: Path, template: Path) -> Path:
    home = tmp_path / "home"
    shutil.copytree(template, home)
    return home


@asynccontextmanager
async def opened(
    home: Path, fake: AnthropicFake, *, catch_up_timeout: float = 60, limits: Limits = WINDOW
) -> AsyncIterator[Agent]:
    provider = provider_for(fake)
    try:
        async with Agent.open(
            home,
            asker=None,
            provider=provider,
            workdir=workdir_beside(home),
            clock=fixed_clock(DAY_ONE),
            limits=limits,
            catch_up_timeout=catch_up_timeout,
        ) as agent:
            yield agent
    finally:
        await provider.aclose()


def estimate(body: dict[str, Any]) -> int:
    """The turn's own estimate of a request (`TurnLoop._estimate` + the output cap), from the
    request the fake received: the bytes of the system prompt, the tools and every text."""
    size = sum(len(block["text"].encode()) for block in body.get("system", []))
    for tool in body.get("tools", []):
        schema = json.dumps(tool["input_schema"], ensure_ascii=False, separators=(",", ":"))
        size += len(schema) + len(tool["description"])
    for message in body["messages"]:
        size += _content_bytes(message["content"])
    return size // BYTES_PER_TOKEN + int(body["max_tokens"])


def _content_bytes(content: Any) -> int:
    if isinstance(content, str):
        return len(content.encode())
    size = 0
    for block in content:
        if block.get("type") == "text":
            size += len(block["text"].encode())
        elif block.get("type") == "tool_result":
            size += _content_bytes(block.get("content", []))
        elif block.get("type") == "tool_use":
            size += len(json.dumps(block["input"], ensure_ascii=False, separators=(",", ":")))
    return size


def within_window(fake: AnthropicFake) -> bool:
    return all(estimate(body) <= WINDOW.context_budget for body in turn_bodies(fake))


def zooms_first_coarse_line(call: Call) -> Outcome:
    """The model opens the view's first coarse line, then answers."""
    if call.after_tool_result:
        return reply("Opened it.")
    found = COARSE.search(call.turns[0][1])
    assert found is not None, "no coarse line in the view"
    return reply(ToolCall("zoom", {"id": int(found[1]), "n": int(found[2])}))


def caught(events: list[AgentEvent]) -> list[CatchingUp]:
    return [event for event in events if isinstance(event, CatchingUp)]


# --- catching up -----------------------------------------------------------------------------


async def test_a_turn_on_a_chat_that_is_behind_waits_visibly_then_answers(home: Path) -> None:
    fake = AnthropicFake(script(slow(0.05, summarizer(100))).push(answer("I remember.")))
    async with opened(home, fake) as agent:
        agent.submit("what do you remember?")
        seen = await collect_turn(agent, timeout=60)
    started = next(i for i, event in enumerate(seen) if isinstance(event, TurnStarted))
    waited = caught(seen[:started])
    assert waited, seen  # the wait was shown, from its start
    assert waited[0].to_go > 0 and not caught(seen[started:])
    assert seen[-1] == TurnEnded("done")
    assert log_of(home)[-2:] == [("user", "what do you remember?"), ("ever", "I remember.")]
    (body,) = turn_bodies(fake)
    assert within_window(fake), estimate(body)
    view = user_texts(body)
    assert not COARSE.search(view)  # it caught up: summaries, no coarse line
    assert re.search(r"^0\+(\d+)\|", view, re.MULTILINE)
    assert not any(isinstance(event, MemoryWarning) for event in seen)


async def test_the_room_for_the_view_is_exactly_what_the_turns_check_allows(
    chat: Chat, ctx: ToolContext, tmp_path: Path
) -> None:
    fake = AnthropicFake(Script(answer("ok")))
    provider = provider_for(fake)
    try:
        opening = "header\nhello"
        frame = len("<chat>\n") + len("\n</chat>")
        ended = []
        for over in (0, 1):  # a loop each: a reply's usage would teach the next its own rate
            loop = replace(bare_loop(provider, chat, ctx, tmp_path / "images"), limits=WINDOW)
            size = loop.view_room(opening) + over
            view = "<chat>\n" + "x" * (size - frame) + "\n</chat>"
            ended.append((await loop.run(view, opening, size)).event.reason)
    finally:
        await provider.aclose()
    assert ended == ["done", "context_full"]
    assert len(turn_bodies(fake)) == 1


# --- when it cannot catch up in time ---------------------------------------------------------


async def test_without_summaries_the_turn_goes_on_with_coarse_lines_that_zoom_opens(
    home: Path,
) -> None:
    summaries = slow(NEVER, summarizer(100))
    fake = AnthropicFake(Script(zooms_first_coarse_line).route(is_compaction, summaries))
    began = time.monotonic()
    async with opened(home, fake, catch_up_timeout=1.0) as agent:
        agent.submit("what do you remember?")
        seen = await collect_turn(agent, timeout=30)
    assert time.monotonic() - began >= 1.0
    assert caught(seen) and seen[-1] == TurnEnded("done")
    warnings = [event.text for event in seen if isinstance(event, MemoryWarning)]
    assert len(warnings) == 1 and "only as coarse lines, which zoom opens" in warnings[0]
    first, _ = turn_bodies(fake)
    assert within_window(fake)
    coarse = COARSE.search(user_texts(first))
    assert coarse is not None and coarse[1] == "0"  # the oldest messages
    start, count = int(coarse[1]), int(coarse[2])
    assert int(coarse[4]) == start + count - 1
    half = count // 2
    kinds = [kind for kind, _ in log_of(home)]
    assert kinds[MESSAGES:] == ["user", "tool", "echo", "ever"]
    zoomed = log_of(home)[MESSAGES + 2][1]
    assert zoomed.startswith(f"zoom: {start}+{half}|") and f"\n{start + half}+{half}|" in zoomed


# --- the user meanwhile ----------------------------------------------------------------------


async def test_cancel_during_the_wait_ends_the_turn_and_keeps_the_messages(home: Path) -> None:
    fake = AnthropicFake(script(slow(NEVER, summarizer(100))))
    async with opened(home, fake, catch_up_timeout=NEVER) as agent:

        def on(event: AgentEvent) -> None:
            if isinstance(event, CatchingUp):
                agent.submit("and the rotation?")
                agent.cancel()

        agent.submit("what do you remember?")
        seen = await collect_turn(agent, on=on)
        await agent.wait_idle()
    assert seen[-1] == TurnEnded("cancelled")
    assert not any(isinstance(event, TurnStarted) for event in seen)
    assert turn_bodies(fake) == []
    assert log_of(home)[MESSAGES:] == [
        ("user", "what do you remember?"),
        ("user", "and the rotation?"),
    ]


async def test_a_message_sent_during_the_wait_joins_the_turn(home: Path) -> None:
    fake = AnthropicFake(script(slow(NEVER, summarizer(100))).push(answer("Both, then.")))
    async with opened(home, fake, catch_up_timeout=3.0) as agent:
        sent: list[str] = []

        def on(event: AgentEvent) -> None:
            if isinstance(event, CatchingUp) and not sent:
                sent.append("and the rotation?")
                agent.submit(sent[0])
                assert agent.busy

        agent.submit("what do you remember?")
        seen = await collect_turn(agent, on=on, timeout=30)
    assert sent and seen[-1] == TurnEnded("done")
    assert sum(isinstance(event, TurnStarted) for event in seen) == 1
    assert log_of(home)[MESSAGES:] == [
        ("user", "what do you remember?"),
        ("user", "and the rotation?"),
        ("ever", "Both, then."),
    ]
    (body,) = turn_bodies(fake)
    assert user_texts(body).endswith("what do you remember?\n\nand the rotation?")
    assert within_window(fake)


# --- the usual wait stays as it was ----------------------------------------------------------


async def test_a_view_that_fits_waits_as_before_and_says_settling(tmp_path: Path) -> None:
    home = tmp_path / "home"
    write_config(home)
    with Chat.open(home / "chat") as chat:
        chat.append("user", "a long message about the nightly backups " * 20)  # > 512 bytes
    fake = AnthropicFake(script(slow(0.2, summarizer(100))).push(answer("ok")))
    async with opened(home, fake) as agent:
        agent.submit("and now?")
        seen = await collect_turn(agent)
    assert seen[0] == Settling(1) and not caught(seen)
    assert "0+1|(not summarized yet" not in user_texts(turn_bodies(fake)[0])


# --- the pace, and when to give up -------------------------------------------------------------


def test_the_pace_is_known_after_ten_seconds_and_measures_the_last_minute() -> None:
    pace = Pace(started=0.0)
    pace.add(0.0, 100)
    pace.add(5.0, 140)
    assert pace.eta(5.0, 80) is None  # the first calls land together: too early to say
    pace.add(PACE_AFTER, 180)
    assert pace.eta(PACE_AFTER, 80) == pytest.approx(10.0)  # 8 a second
    for second in range(11, 200):
        pace.add(float(second), 180 + 2 * (second - 10))  # then 2 a second
    assert pace.eta(199.0, 80) == pytest.approx(40.0)  # the last minute's pace, not the start's
    assert not pace.stalled(199.0)


def test_a_minute_without_a_summary_is_a_stall() -> None:
    pace = Pace(started=0.0)
    for second in range(int(PACE_WINDOW) + 1):
        pace.add(float(second), 7)
    assert pace.eta(PACE_WINDOW, 10) is None and pace.stalled(PACE_WINDOW)


async def test_the_status_bar_says_how_far_behind_the_memory_is(home: Path) -> None:
    from evertalk.tui.status import status_line

    fake = AnthropicFake(script(slow(NEVER, summarizer(100))))
    async with opened(home, fake) as agent:
        behind = agent.status().catching_up
        assert behind is not None and behind.to_go >= MESSAGES // 2
        line = status_line(agent.status())
        assert f"catching up: {behind.to_go:,} summaries to go, about" in line


async def test_start_now_during_the_wait_goes_on_at_once_with_what_is_built(home: Path) -> None:
    fake = AnthropicFake(script(slow(NEVER, summarizer(100))).push(answer("From coarse lines.")))
    async with opened(home, fake, catch_up_timeout=NEVER) as agent:

        def on(event: AgentEvent) -> None:
            if isinstance(event, CatchingUp):
                agent.view_wait.start_now()  # the person pressed Enter: no more waiting

        agent.submit("what do you remember?")
        seen = await collect_turn(agent, on=on, timeout=30)
    assert caught(seen) and seen[-1] == TurnEnded("done")
    warnings = [event.text for event in seen if isinstance(event, MemoryWarning)]
    assert warnings == [
        warning for warning in warnings if "you asked to start without catching up" in warning
    ]
    assert len(warnings) == 1 and "only as coarse lines" in warnings[0]
    assert within_window(fake)


async def test_a_message_sent_with_now_does_not_wait_for_the_chat_to_catch_up(
    home: Path,
) -> None:
    fake = AnthropicFake(script(slow(NEVER, summarizer(100))).push(answer("At once.")))
    async with opened(home, fake, catch_up_timeout=NEVER) as agent:
        agent.submit("what do you remember?")
        agent.view_wait.start_now()  # as the service does for `send` with `now`
        seen = await collect_turn(agent, timeout=30)
    assert not caught(seen)  # it never said it waits
    assert seen[-1] == TurnEnded("done")
    assert any("you asked to start" in e.text for e in seen if isinstance(e, MemoryWarning))
