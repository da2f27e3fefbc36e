"""The permission policy of SPEC §6.6: config rules, --allow grants, "always" answers, headless."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

from evertalk.agent.permissions import AskedInput, Decision
from evertalk.agent.policy import DENIED, GUARDED, Policy, parse_grants
from evertalk.config import ToolPolicies

pytestmark = pytest.mark.anyio


class ScriptedAsker:
    def __init__(self, *answers: Decision, delay: float = 0) -> None:
        self.answers = list(answers)
        self.asked: list[tuple[str, dict[str, Any]]] = []
        self.delay = delay

    async def ask(self, tool: str, tool_input: dict[str, Any]) -> Decision:
        self.asked.append((tool, tool_input))
        await anyio.sleep(self.delay)
        return self.answers.pop(0)


async def test_defaults_headless() -> None:
    policy = Policy(ToolPolicies())
    assert await policy.permit("read", {"path": "x"}, None)
    for tool in ("shell", "write", "edit"):
        assert not await policy.permit(tool, {"command": "true"}, None)
    for tool in ("zoom", "date", "agent"):  # not guarded
        assert await policy.permit(tool, {}, None)


async def test_headless_with_an_asker_does_not_ask() -> None:
    asker = ScriptedAsker("always")
    policy = Policy(ToolPolicies(), interactive=False)
    assert not await policy.permit("shell", {"command": "true"}, asker)
    assert asker.asked == []


async def test_grants_and_config_allow() -> None:
    policy = Policy(ToolPolicies(write="allow"), granted=["shell"])
    assert await policy.permit("shell", {"command": "rm -rf build"}, None)
    assert await policy.permit("write", {"path": "a", "content": ""}, None)
    assert not await policy.permit("edit", {"path": "a", "old": "x", "new": "y"}, None)


async def test_deny_wins_over_everything() -> None:
    asker = ScriptedAsker("always")
    policy = Policy(
        ToolPolicies(read="deny", shell="deny"), granted=["read", "shell"], interactive=True
    )
    assert not await policy.permit("read", {"path": "x"}, asker)
    refusal = await policy.check("shell", {"command": "true"}, asker)
    assert refusal is not None and refusal.startswith(DENIED) and "deny" in refusal
    assert asker.asked == []


async def test_ask_answers() -> None:
    asker = ScriptedAsker("once", "deny", "always", "always")
    policy = Policy(ToolPolicies(), interactive=True)
    assert await policy.permit("write", {"path": "a", "content": "1"}, asker)
    assert await policy.check("write", {"path": "a", "content": "1"}, asker) == DENIED
    assert await policy.permit("write", {"path": "b", "content": "2"}, asker)  # always: the tool
    assert await policy.permit("write", {"path": "c", "content": "3"}, asker)
    assert len(asker.asked) == 3
    assert await policy.permit("edit", {"path": "c", "old": "3", "new": "4"}, asker)  # asked
    assert len(asker.asked) == 4
    assert asker.asked[-1] == ("edit", {"path": "c", "old": "3", "new": "4"})


async def test_always_for_shell_is_the_exact_command() -> None:
    asker = ScriptedAsker("always", "deny", "deny")
    policy = Policy(ToolPolicies(), interactive=True)
    assert await policy.permit("shell", {"command": "make test"}, asker)
    assert await policy.permit("shell", {"command": "make test", "timeout": 5}, asker)
    assert not await policy.permit("shell", {"command": "make test "}, asker)
    assert not await policy.permit("shell", {"command": "make test; rm -rf /"}, asker)
    assert len(asker.asked) == 3


async def test_one_question_at_a_time() -> None:
    asker = ScriptedAsker("always", delay=0.05)
    policy = Policy(ToolPolicies(), interactive=True)
    answers: list[bool] = []

    async def one() -> None:
        answers.append(await policy.permit("shell", {"command": "ls"}, asker))

    async with anyio.create_task_group() as group:
        group.start_soon(one)
        group.start_soon(one)
    assert answers == [True, True]
    assert len(asker.asked) == 1  # the second call waited and found the "always"


def test_grants_are_checked() -> None:
    assert parse_grants("shell,write, edit") == ["shell", "write", "edit"]
    assert parse_grants("") == []
    with pytest.raises(ValueError, match="unknown tool 'shel'"):
        parse_grants("shel")
    with pytest.raises(ValueError, match="zoom"):
        Policy(ToolPolicies(), granted=["zoom"])
    assert GUARDED == ("shell", "read", "write", "edit", "fetch")


async def test_the_question_names_the_subagent_that_asks() -> None:
    asker = ScriptedAsker("once", "once")
    policy = Policy(ToolPolicies(), interactive=True)
    assert await policy.permit("shell", {"command": "ls"}, asker, agent="Scout")
    assert await policy.permit("shell", {"command": "ls"}, asker)
    (tool, by_scout), (_, by_turn) = asker.asked
    # the input an asker gets is still the tool's input (older askers read only that) …
    assert tool == "shell" and by_scout == by_turn == {"command": "ls"}
    # … and says whose call it is: a subagent's name, or None for the main turn
    assert isinstance(by_scout, AskedInput) and by_scout.agent == "Scout"
    assert getattr(by_turn, "agent", "missing") is None
