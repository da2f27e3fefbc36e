"""The `agent` tool's input checks and the depth rule (SPEC §6.7)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from evertalk.agent.policy import Policy
from evertalk.agent.tools import DEPTH_ERROR, Toolbox, ToolContext, ToolError, ToolOutcome
from evertalk.chat import Chat
from evertalk.config import ToolPolicies

pytestmark = pytest.mark.anyio


class Starter:
    """Stands in for the subagent runner's `start_agent`: records what it was asked to start."""

    def __init__(self, refuse: str | None = None) -> None:
        self.started: list[tuple[str, str]] = []
        self.refuse = refuse

    async def __call__(self, name: str, task: str) -> str:
        if self.refuse is not None:
            raise ToolError(self.refuse)
        self.started.append((name, task))
        return f"{name} started in the background"


@pytest.fixture
def starter() -> Starter:
    return Starter()


@pytest.fixture
def ctx(chat: Chat, tmp_path: Path, starter: Starter) -> ToolContext:
    work = tmp_path / "work"
    work.mkdir()
    agents = tmp_path / "chat" / "agents"
    return ToolContext(chat=chat, workdir=work, agents_dir=agents, start_agent=starter)


def toolbox() -> Toolbox:
    return Toolbox(Policy(ToolPolicies()), None)


async def agent(ctx: ToolContext, tool_input: Any, box: Toolbox | None = None) -> ToolOutcome:
    return await (box or toolbox()).run("agent", tool_input, ctx)


def assert_error(outcome: ToolOutcome, *words: str) -> None:
    assert outcome.is_error and "\n" not in outcome.text
    for word in words:
        assert word in outcome.text, outcome.text


async def test_starts_and_returns_the_confirmation(ctx: ToolContext, starter: Starter) -> None:
    outcome = await agent(ctx, {"name": "Scout", "task": "find the bug"})
    assert not outcome.is_error
    assert outcome.text == "Scout started in the background"
    assert starter.started == [("Scout", "find the bug")]


async def test_name_rule(ctx: ToolContext, starter: Starter) -> None:
    good = ["A", "Scout", "r2-d2", "x_y", "a" + "b" * 31]
    bad = ["", "1abc", "-x", "_x", "a" + "b" * 32, "bad name", "Éclair", "../x", "a/b", "a.b"]
    for name in good:
        assert not (await agent(ctx, {"name": name, "task": "t"})).is_error, name
    for name in bad:
        assert_error(await agent(ctx, {"name": name, "task": "t"}), "name")
    assert [name for name, _ in starter.started] == good


async def test_task_and_input_checks(ctx: ToolContext, starter: Starter) -> None:
    for bad in (
        {"name": "Scout", "task": ""},
        {"name": "Scout", "task": "  \n"},
        {"name": "Scout"},
        {"task": "t"},
        {"name": 5, "task": "t"},
        {"name": "Scout", "task": ["t"]},
        {"name": "Scout", "task": "t", "model": "big"},
    ):
        assert_error(await agent(ctx, bad))
    assert starter.started == []


async def test_a_name_is_unique_in_the_chat(ctx: ToolContext, starter: Starter) -> None:
    (ctx.agents_dir / "Scout").mkdir(parents=True)
    assert_error(await agent(ctx, {"name": "Scout", "task": "t"}), "already used")
    assert_error(await agent(ctx, {"name": "SCOUT", "task": "t"}), "already used")
    box = toolbox()
    assert not (await agent(ctx, {"name": "Runner", "task": "t"}, box)).is_error
    # the runner has not made its folder yet: the toolbox still knows the name is taken
    assert_error(await agent(ctx, {"name": "runner", "task": "t"}, box), "already used")
    assert starter.started == [("Runner", "t")]


async def test_depth_one(ctx: ToolContext, starter: Starter) -> None:
    ctx.is_subagent = True
    for tool_input in ({"name": "Scout", "task": "t"}, {"name": "1bad", "task": ""}, {}):
        outcome = await agent(ctx, tool_input)
        assert outcome.is_error and outcome.text == DEPTH_ERROR
    assert starter.started == []


async def test_unavailable_and_refused_starts(ctx: ToolContext) -> None:
    ctx.start_agent = None
    assert_error(await agent(ctx, {"name": "Scout", "task": "t"}), "not available")
    refusing = Starter(refuse="8 subagents are already running: wait for one to report")
    ctx.start_agent = refusing
    box = toolbox()
    assert_error(await agent(ctx, {"name": "Scout", "task": "t"}, box), "8 subagents")
    ctx.start_agent = Starter()
    assert not (await agent(ctx, {"name": "Scout", "task": "t"}, box)).is_error  # name freed
