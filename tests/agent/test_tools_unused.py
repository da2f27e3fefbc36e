"""A model that never calls a tool: `[turn] tools = "off"` offers it none, and with tools on the
session says once when the model called none in turns whose replies tell of work done
(`tool_watch.py`); ordinary replies that needed no tool do not count."""

from __future__ import annotations

import io
import json
from pathlib import Path

import anyio
import pytest
from test_turn_support import collect_turn, is_compaction, opened, script, turn_bodies

from evertalk.agent.session import Agent
from evertalk.agent.tool_watch import QUIET_TURNS, ToolWatch, unused_text
from evertalk.client.printers import JsonPrinter, ReplyPrinter
from evertalk.prompts import NO_TOOLS_HEADING
from evertalk.protocol.events import (
    AgentEvent,
    EndReason,
    ReplyLogged,
    ToolStarted,
    ToolsUnused,
    TurnEnded,
)
from fakes import AnthropicFake, Call, Fail, OpenAIFake, Script, ToolCall, chat, reply, summarizer

pytestmark = pytest.mark.anyio

ACTING = "I ran `ls ~/notes`: the folder holds three files, and the newest is from today."
"""A reply that tells of a command run, as a model that makes up its tools' work writes."""


def acting_script() -> Script:
    """Every turn's reply tells of a command it did not run; compactions get summaries."""
    return Script(chat(ACTING)).route(is_compaction, summarizer(100))


LONG = "Please keep this note about the trip to Lisbon in mind. " * 20
"""Long enough to need a summary, so that a compaction call is made."""


def tools_off(home: Path) -> None:
    with (home / "config.toml").open("a") as file:
        file.write('\n[turn]\ntools = "off"\n')


def is_compaction_task(call: Call) -> bool:
    """Told apart by its task, after the context: without tools a compaction sends no
    `tool_choice` either, by which `script()` tells them."""
    first = next((text for role, text in call.turns if role == "user"), "")
    return "\nCompaction:" in first


def compaction_script() -> Script:
    return Script().route(is_compaction_task, summarizer(100))


async def compacted(agent: Agent) -> None:
    with anyio.fail_after(15):
        while agent.compactor.in_flight or agent.compactor.unbuilt():
            await anyio.sleep(0.02)


async def turns(agent: Agent, count: int) -> list[AgentEvent]:
    """The events of `count` turns, one message after another."""
    seen: list[AgentEvent] = []
    for n in range(count):
        agent.submit(f"message {n}")
        seen += await collect_turn(agent)
    return seen


def notices(seen: list[AgentEvent]) -> list[ToolsUnused]:
    return [event for event in seen if isinstance(event, ToolsUnused)]


@pytest.mark.parametrize("make_fake", [AnthropicFake, OpenAIFake])
async def test_tools_off_sends_no_tools_to_turns_or_compactions(
    home: Path, make_fake: type[AnthropicFake] | type[OpenAIFake]
) -> None:
    tools_off(home)
    behaviour = compaction_script()
    fake = make_fake(behaviour)
    async with opened(home, fake) as agent:
        agent.submit(LONG)
        await collect_turn(agent)
        await compacted(agent)
    calls = behaviour.calls
    turn_calls = [call for call in calls if not is_compaction_task(call)]
    compaction_calls = [call for call in calls if is_compaction_task(call)]
    assert turn_calls and compaction_calls
    for call in calls:
        assert "tools" not in call.body and "tool_choice" not in call.body
        assert NO_TOOLS_HEADING in call.system_text  # one system prompt for both, as ever


async def test_tools_on_sends_them_and_no_note(home: Path) -> None:
    fake = AnthropicFake(script())
    async with opened(home, fake) as agent:
        agent.submit("hello")
        await collect_turn(agent)
    (body,) = turn_bodies(fake)
    assert [tool["name"] for tool in body["tools"]][:2] == ["zoom", "date"]
    assert NO_TOOLS_HEADING not in str(body["system"])


async def test_a_model_that_calls_no_tool_is_told_of_once(home: Path) -> None:
    fake = AnthropicFake(acting_script())
    async with opened(home, fake) as agent:
        first = await turns(agent, QUIET_TURNS - 1)
        assert not notices(first) and not agent.status().tools_unused
        seen = await turns(agent, 3)
        assert agent.status().tools_unused
    (notice,) = notices(seen)  # once, though two more quiet turns followed
    assert notice.turns == QUIET_TURNS
    assert f"in {QUIET_TURNS} turns whose replies tell of commands run" in notice.text
    assert 'tools = "off"' in notice.text and "made them up" in notice.text
    # it comes before the end of the turn that made it due: `-p` stops reading at that end
    after = seen[seen.index(notice) + 1]
    assert isinstance(after, TurnEnded) and after.reason == "done"


async def test_a_tool_call_in_the_first_turns_means_no_notice(home: Path) -> None:
    # the second turn calls one tool; every other reply is plain text
    tool_call = reply("Let me look.", ToolCall("date", {"id": 0}))
    fake = AnthropicFake(script().push(chat("Hello."), tool_call, chat("Message 0 is today's.")))
    async with opened(home, fake) as agent:
        seen = await turns(agent, QUIET_TURNS + 2)
        assert not agent.status().tools_unused
    assert [e.reason for e in seen if isinstance(e, TurnEnded)] == ["done"] * (QUIET_TURNS + 2)
    assert [e.name for e in seen if isinstance(e, ToolStarted)] == ["date"]
    assert not notices(seen)


async def test_no_notice_when_tools_are_off(home: Path) -> None:
    tools_off(home)
    fake = AnthropicFake(compaction_script())
    async with opened(home, fake) as agent:
        seen = await turns(agent, QUIET_TURNS + 1)
        assert not agent.status().tools_unused
    assert not notices(seen)


async def test_ordinary_replies_that_needed_no_tool_do_not_count(home: Path) -> None:
    # a greeting, or a question answered from the view: no tool was needed, none was called
    fake = AnthropicFake(script())  # every reply: "Hello from the fake model."
    async with opened(home, fake) as agent:
        seen = await turns(agent, QUIET_TURNS + 2)
        assert not agent.status().tools_unused
    assert not notices(seen)


async def test_turns_that_fail_do_not_count(home: Path) -> None:
    failure = Fail(400, "bad request")
    fake = AnthropicFake(acting_script().push(failure))
    async with opened(home, fake) as agent:
        seen = await turns(agent, QUIET_TURNS)
        ends = [event.reason for event in seen if isinstance(event, TurnEnded)]
        assert ends == ["error"] + ["done"] * (QUIET_TURNS - 1) and not notices(seen)
        seen = await turns(agent, 1)
    assert len(notices(seen)) == 1


def test_the_mark_clears_when_the_model_calls_a_tool_and_a_new_model_restarts() -> None:
    watch = ToolWatch(offered=True, turns=2)

    def turn(model: str, reason: EndReason = "done") -> ToolsUnused | None:
        assert watch.observe(ReplyLogged(ACTING), model) is None
        return watch.observe(TurnEnded(reason), model)

    assert turn("smol") is None
    assert turn("smol", "cancelled") is None  # not a normal end
    assert watch.observe(ReplyLogged("Hello!"), "smol") is None
    assert watch.observe(TurnEnded("done"), "smol") is None  # a reply that claims nothing
    notice = turn("smol")
    assert notice is not None and "smol" in notice.text and watch.unused
    assert turn("smol") is None  # said once
    watch.observe(ToolStarted("1", "date", {"id": 0}), "smol")
    assert not watch.unused  # it calls tools after all: the mark goes
    watch.restart()  # another model: its own count
    assert turn("big") is None
    assert turn("big") is not None


def test_p_says_it_on_standard_error_and_json_prints_it() -> None:
    notice = ToolsUnused(QUIET_TURNS, unused_text("smol", QUIET_TURNS))
    out, err = io.StringIO(), io.StringIO()
    ReplyPrinter(out, err).show(notice)
    assert out.getvalue() == "" and err.getvalue() == notice.text + "\n"  # stdout: the reply
    JsonPrinter(out, err).show(notice)
    line = json.loads(out.getvalue())
    assert line == {"type": "tools_unused", "turns": QUIET_TURNS, "text": notice.text}
