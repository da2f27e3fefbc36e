"""Subagents (SPEC §6.7): their own call and log, the report in the main chat as a `work`
message, arriving between tool calls or starting a turn, at most 8 at once."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
from test_turn_support import (
    collect_turn,
    log_of,
    opened,
    records_of,
    script,
    texts,
    turn_bodies,
)

from evertalk.agent.permissions import Decision
from evertalk.agent.session import Agent
from evertalk.agent.subagents import (
    MAX_RUNNING,
    AgentLog,
    SubagentError,
    quit_report,
    stop_report,
)
from evertalk.protocol.events import (
    AgentEvent,
    Delivered,
    TextDelta,
    ToolFinished,
    ToolStarted,
    TurnStarted,
)
from fakes import AnthropicFake, Call, ToolCall, constant, reply, sequence, slow
from fakes import chat as answer
from polling import until

pytestmark = pytest.mark.anyio


def subagent(name: str):  # type: ignore[no-untyped-def]
    return lambda call: f"you are the subagent {name}," in call.last_user_text


def agent_records(home: Path, name: str) -> list[dict[str, object]]:
    folder = home / "chat" / "agents" / name
    return [
        json.loads(line)
        for path in sorted(folder.glob("*.jsonl"))
        for line in path.read_text().splitlines()
    ]


async def test_a_report_when_idle_starts_a_turn(home: Path) -> None:
    task = "count the files in ~/notes"
    fake = AnthropicFake(
        script()
        .route(subagent("Scout"), slow(0.3, answer("There are 3 files.")))
        .push(
            reply(ToolCall("agent", {"name": "Scout", "task": task})),
            answer("Scout is on it."),
            answer("Scout found 3 files."),
        )
    )
    async with opened(home, fake) as agent:
        agent.submit("have Scout count my notes")
        seen = await collect_turn(agent, turns=2)
        assert agent.status().subagents == 0
    starts = [e for e in seen if isinstance(e, TurnStarted)]
    assert len(starts) == 2 and not any(isinstance(e, Delivered) for e in seen)
    started = next(e for e in seen if isinstance(e, ToolFinished))
    assert not started.is_error and "Scout" in started.output
    log = log_of(home)
    assert [kind for kind, _ in log] == ["user", "tool", "echo", "ever", "work", "ever"]
    assert log[4] == ("work", "[Scout] There are 3 files.")
    assert records_of(home)[4]["agent"] == "Scout"
    # the subagent's own call: [tools][system][view][header + task], the master's tools and system
    sub = next(c for c in fake.behaviour.calls if subagent("Scout")(c))  # type: ignore[attr-defined]
    first = turn_bodies(fake)[0]
    assert sub.body["tools"] == first["tools"] and sub.body["system"] == first["system"]
    sub_blocks = texts(sub.body["messages"][0]["content"])
    assert sub_blocks[-2].endswith("</chat>") and sub_blocks[-1].endswith("\n" + task)
    # its own log, ids from 0; the report's turn carries it after the view
    records = agent_records(home, "Scout")
    assert [(r["i"], r["kind"], r["text"]) for r in records] == [
        (0, "user", task),
        (1, "ever", "There are 3 files."),
    ]
    assert list(records[0])[:5] == ["i", "kind", "text", "size", "date"]
    report_turn = turn_bodies(fake)[-1]
    assert texts(report_turn["messages"][0]["content"])[-1].endswith("\n[Scout] There are 3 files.")
    ledger = [json.loads(x) for x in (home / "usage.jsonl").read_text().splitlines()]
    assert [r["turn"] for r in ledger if r["role"] == "subagent"] == ["Scout"]


async def test_a_report_mid_turn_arrives_between_tool_calls(home: Path) -> None:
    fake = AnthropicFake(
        script()
        .route(subagent("Digger"), answer("The log rotates weekly."))
        .push(
            reply(ToolCall("agent", {"name": "Digger", "task": "find the rotation"})),
            reply(ToolCall("shell", {"command": "sleep 0.5"})),
            answer("Digger says weekly."),
        )
    )
    async with opened(home, fake, granted=["shell"]) as agent:
        agent.submit("ask Digger, and meanwhile wait a bit")
        seen = await collect_turn(agent)
        await agent.wait_quiet()
    assert sum(isinstance(e, TurnStarted) for e in seen) == 1
    assert [e for e in seen if isinstance(e, Delivered)] == [
        Delivered("work", "[Digger] The log rotates weekly.")
    ]
    kinds = [kind for kind, _ in log_of(home)]
    assert kinds == ["user", "tool", "echo", "tool", "echo", "work", "ever"]
    main = [
        b for b in turn_bodies(fake) if "the subagent" not in texts(b["messages"][0]["content"])[-1]
    ]
    third = main[2]["messages"][-1]["content"]
    assert [block["type"] for block in third] == ["tool_result", "text"]
    assert third[1]["text"] == "[Digger] The log rotates weekly."


async def test_at_most_eight_at_once_and_names_are_unique(home: Path) -> None:
    calls = [ToolCall("agent", {"name": f"A{n}", "task": "wait"}) for n in range(MAX_RUNNING + 1)]
    calls.append(ToolCall("agent", {"name": "A0", "task": "again"}))

    def any_subagent(call: Call) -> bool:
        return "you are the subagent" in call.last_user_text

    fake = AnthropicFake(
        script().route(any_subagent, slow(30, answer("late"))).push(reply(*calls), answer("ok"))
    )
    async with opened(home, fake) as agent:
        agent.submit("start many")
        seen = await collect_turn(agent)
        assert agent.status().subagents == MAX_RUNNING
    results = [e for e in seen if isinstance(e, ToolFinished)]
    assert [e.is_error for e in results] == [False] * MAX_RUNNING + [True, True]
    assert "8 subagents are running" in results[MAX_RUNNING].output
    assert "already" in results[-1].output
    # closing cancelled them, and the main chat says so for each (later turns must not think
    # they still run), with `agent` set like a report
    stopped = [(r["text"], r.get("agent")) for r in records_of(home) if r["kind"] == "work"]
    assert sorted(stopped) == sorted((quit_report(f"A{n}"), f"A{n}") for n in range(MAX_RUNNING))
    assert all(text.startswith(f"[{agent}] stopped unfinished") for text, agent in stopped)


def test_agent_log_pages_and_modes(tmp_path: Path) -> None:
    log = AgentLog.create(tmp_path / "agents", "Pager")
    ids = log.append("echo", "y " * 40_000)
    log.close()
    assert ids == [0, 1, 2]
    folder = tmp_path / "agents" / "Pager"
    assert folder.stat().st_mode & 0o777 == 0o700
    (day,) = folder.iterdir()
    assert day.stat().st_mode & 0o777 == 0o600
    records = [json.loads(line) for line in day.read_text().splitlines()]
    assert "".join(r["text"] for r in records) == "y " * 40_000


class RecordingAsker:
    """Says "once" to everything, and keeps who asked about what."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, dict[str, Any]]] = []

    async def ask(self, tool: str, tool_input: dict[str, Any]) -> Decision:
        self.asked.append((tool, tool_input))
        return "once"


async def test_a_subagents_question_names_it(home: Path) -> None:
    fake = AnthropicFake(
        script()
        .route(
            lambda call: "you are the subagent Runner," in call.turns[0][1],
            sequence(constant(reply(ToolCall("shell", {"command": "true"}))), answer("Ran it.")),
        )
        .push(
            reply(ToolCall("agent", {"name": "Runner", "task": "run true"})),
            answer("Runner started."),
            answer("Runner ran it."),
        )
    )
    asker = RecordingAsker()
    async with opened(home, fake, asker=asker, workdir=home) as agent:
        agent.submit("have Runner run true")
        await collect_turn(agent, turns=2)
    assert [(tool, getattr(asked, "agent", None)) for tool, asked in asker.asked] == [
        ("shell", "Runner")
    ]
    assert ("work", "[Runner] Ran it.") in log_of(home)


# -- the user lists and stops them ------------------------------------------------------------


def work_messages(home: Path) -> list[tuple[str, object]]:
    return [(r["text"], r.get("agent")) for r in records_of(home) if r["kind"] == "work"]


def master_calls(fake: AnthropicFake) -> int:
    """How many calls the main turns made (the subagents' own left out)."""
    return sum(
        "you are the subagent" not in texts(body["messages"][0]["content"])[-1]
        for body in turn_bodies(fake)
    )


async def next_turn_is_for(agent: Agent, home: Path, text: str) -> bool:
    """Send `text` and wait for the next turn to end: whether that turn was started by `text`
    alone (a turn started by anything before it, a stop report say, would come first)."""
    agent.submit(text)
    seen = await collect_turn(agent)
    (started,) = [e for e in seen if isinstance(e, TurnStarted)]
    log = log_of(home)
    return [log[i] for i in started.message_ids] == [("user", text)]


async def test_a_running_subagent_is_listed_then_stopped_by_name(home: Path) -> None:
    task = "read every note\nand sum them up"
    fake = AnthropicFake(
        script()
        .route(subagent("Slow"), slow(30, answer("too late")))
        .push(
            reply(ToolCall("agent", {"name": "Slow", "task": task})),
            answer("Slow is on it."),
            answer("Nothing else."),
        )
    )
    async with opened(home, fake) as agent:
        began = time.monotonic()
        agent.submit("have Slow read my notes")
        await collect_turn(agent)
        # its task is logged once the settle wait is over: then its call is under way
        await until(lambda: [a.messages for a in agent.subagents.listing()] == [1])
        (seen,) = agent.subagents.listing()
        assert (seen.name, seen.task) == ("Slow", "read every note")
        assert 0 <= seen.seconds <= time.monotonic() - began  # its own time, on this clock
        assert agent.subagents.stop("Slow") == stop_report("Slow")
        assert agent.subagents.listing() == [] and agent.status().subagents == 0
        # said at once, in the main chat, and no turn of its own: the user ended the work
        assert work_messages(home) == [(stop_report("Slow"), "Slow")]
        assert not agent.busy
        with pytest.raises(SubagentError, match=r"^Slow is not running: it has ended"):
            agent.subagents.stop("Slow")
        with pytest.raises(SubagentError, match=r"^no subagent named Nobody is running$"):
            agent.subagents.stop("Nobody")
        # a message sent now comes after anything the stop set going: its turn is the next
        assert await next_turn_is_for(agent, home, "anything else?")
        assert master_calls(fake) == 3
    # once, not again as a quit report at the close
    assert work_messages(home) == [(stop_report("Slow"), "Slow")]
    assert stop_report("Slow").startswith("[Slow] ") and 'zoom("Slow")' in stop_report("Slow")
    first = agent_records(home, "Slow")[0]
    assert (first["kind"], first["text"]) == ("user", task)


async def test_a_subagent_stopped_mid_turn_reaches_the_turn(home: Path) -> None:
    fake = AnthropicFake(
        script()
        .route(subagent("Digger"), slow(30, answer("too late")))
        .push(
            reply(ToolCall("agent", {"name": "Digger", "task": "dig"})),
            reply(ToolCall("shell", {"command": "sleep 0.3"})),
            answer("Digger was stopped."),
        )
    )

    async with opened(home, fake, granted=["shell"]) as agent:

        def stop_on_shell(event: AgentEvent) -> None:
            if isinstance(event, ToolStarted) and event.name == "shell":
                agent.subagents.stop("Digger")

        agent.submit("dig, then wait")
        seen = await collect_turn(agent, on=stop_on_shell)
        assert not agent.busy
    assert sum(isinstance(e, TurnStarted) for e in seen) == 1
    assert [e for e in seen if isinstance(e, Delivered)] == [
        Delivered("work", stop_report("Digger"))
    ]
    kinds = [kind for kind, _ in log_of(home)]
    assert kinds == ["user", "tool", "echo", "tool", "echo", "work", "ever"]
    assert work_messages(home) == [(stop_report("Digger"), "Digger")]


async def test_a_stop_report_the_turn_missed_is_logged_without_a_turn(home: Path) -> None:
    fake = AnthropicFake(
        script()
        .route(subagent("Late"), slow(30, answer("too late")))
        .push(
            reply(ToolCall("agent", {"name": "Late", "task": "wait"})),
            slow(0.1, answer("Late is on it, and I am still talking."), chunk_delay=0.05),
            answer("Nothing else."),
        )
    )
    async with opened(home, fake) as agent:
        stopped: list[str] = []

        def stop_in_last_reply(event: AgentEvent) -> None:
            # the last call streams: no tool call follows it, so no delivery either
            if isinstance(event, TextDelta) and not stopped:
                stopped.append(agent.subagents.stop("Late"))

        agent.submit("start Late")
        seen = await collect_turn(agent, on=stop_in_last_reply)
        assert await next_turn_is_for(agent, home, "anything else?")
        assert master_calls(fake) == 3
    assert stopped == [stop_report("Late")] and not any(isinstance(e, Delivered) for e in seen)
    kinds = [kind for kind, _ in log_of(home)]
    assert kinds == ["user", "tool", "echo", "ever", "work", "user", "ever"]
    assert work_messages(home) == [(stop_report("Late"), "Late")]
