"""The shell tool through the Toolbox: output, status, timeouts, clipping, and permissions
(SPEC §1.5, §6.6; issue 4 §5: never without permission in headless mode)."""

from __future__ import annotations

import os
import re
import time
import uuid
from dataclasses import replace
from pathlib import Path
from typing import Any

import anyio
import pytest

from evertalk.agent.permissions import Decision
from evertalk.agent.policy import DENIED, Policy
from evertalk.agent.tools import Toolbox, ToolContext, ToolOutcome
from evertalk.agent.tools.sandbox import Sandbox, probe
from evertalk.config import SandboxMode, ToolPolicies
from evertalk.memory.text import MESSAGE_LIMIT, clip_output

pytestmark = pytest.mark.anyio

LIMIT = MESSAGE_LIMIT - len("shell: ")
SANDBOXED = anyio.run(probe) is None


@pytest.fixture(autouse=True)
def sandbox(ctx: ToolContext) -> None:
    """Commands run in the sandbox where it starts; elsewhere without one, so that no result
    carries the note that says so (test_sandbox.py tests that note)."""
    ctx.sandbox = Sandbox(mode="auto" if SANDBOXED else "off")


class ScriptedAsker:
    """The terminal app's part, scripted: answers in order, and remembers what it was asked."""

    def __init__(self, *answers: Decision) -> None:
        self.answers = list(answers)
        self.asked: list[tuple[str, dict[str, Any]]] = []

    async def ask(self, tool: str, tool_input: dict[str, Any]) -> Decision:
        self.asked.append((tool, tool_input))
        return self.answers.pop(0)


def allowed() -> Toolbox:
    return Toolbox(Policy(ToolPolicies(shell="allow")), None)


async def shell(ctx: ToolContext, command: str, **more: Any) -> ToolOutcome:
    return await allowed().run("shell", {"command": command, **more}, ctx)


def marked() -> tuple[str, str]:
    """A name for a process to run under (`exec -a`), and the way to write it in a command so
    that the command's own text does not hold it: only that process is found by the name."""
    name = f"evertalk-test-{uuid.uuid4().hex}"
    return name, f'"{name[:8]}"{name[8:]}'


def running(name: str) -> list[int]:
    """The processes, seen from here (outside any sandbox), whose command line holds `name`;
    a zombie waiting for its reaper has ended and does not count."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            if name.encode() not in (entry / "cmdline").read_bytes():
                continue
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):  # not a process, or it ended meanwhile
            continue
        if state not in ("Z", "X"):
            found.append(int(entry.name))
    return found


async def wait_gone(name: str, seconds: float = 15.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not running(name):
            return True
        await anyio.sleep(0.05)
    return not running(name)


async def wait_running(name: str, seconds: float = 5.0) -> None:
    with anyio.fail_after(seconds):
        while not running(name):
            await anyio.sleep(0.01)


# -- running ------------------------------------------------------------------------------------


async def test_output_and_exit_status(ctx: ToolContext) -> None:
    outcome = await shell(ctx, "echo out; echo err >&2; exit 3")
    assert outcome.text == "out\nerr\n[exit status 3]"
    assert not outcome.is_error  # a failing command is a result, not a tool error
    assert outcome.log_text("shell") == "shell: out\nerr\n[exit status 3]"


async def test_quiet_and_unterminated_output(ctx: ToolContext) -> None:
    assert (await shell(ctx, "true")).text == "[exit status 0]"
    assert (await shell(ctx, "printf abc")).text == "abc\n[exit status 0]"


async def test_runs_in_the_workdir_with_no_stdin(ctx: ToolContext) -> None:
    assert (await shell(ctx, "pwd")).text == f"{ctx.workdir}\n[exit status 0]"
    assert (await shell(ctx, "cat")).text == "[exit status 0]"  # /dev/null: no wait


async def test_undecodable_bytes_are_replaced(ctx: ToolContext) -> None:
    assert (await shell(ctx, r"printf '\377\376ok'")).text == "\ufffd\ufffdok\n[exit status 0]"


async def test_commands_see_the_allow_list_and_the_named_variables_only(
    ctx: ToolContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-should-never-be-logged")
    monkeypatch.setenv("PGPASSWORD", "pg-password-never-logged")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "aws-secret-never-logged")
    monkeypatch.setenv("LC_TIME", "C.UTF-8")
    monkeypatch.setenv("EVERTALK_TEST_UNLISTED", "unlisted")
    monkeypatch.setenv("DEPLOY_TOKEN", "named-by-the-user")
    outcome = await shell(ctx, "env")
    assert "never-logged" not in outcome.text
    assert "EVERTALK_TEST_UNLISTED" not in outcome.text  # not on the list, not named
    assert "named-by-the-user" not in outcome.text
    assert "LC_TIME=C.UTF-8" in outcome.text and "\nPATH=" in "\n" + outcome.text
    ctx.sandbox = replace(ctx.sandbox, passed=("DEPLOY_TOKEN", "EVERTALK_TEST_UNLISTED"))
    named = (await shell(ctx, "env")).text
    assert "DEPLOY_TOKEN=named-by-the-user" in named and "EVERTALK_TEST_UNLISTED=unlisted" in named
    assert "never-logged" not in named


@pytest.mark.parametrize("mode", ["auto", "off"])  # in the sandbox (where it starts) and not
async def test_timeout_kills_the_whole_group(ctx: ToolContext, mode: SandboxMode) -> None:
    ctx.sandbox = Sandbox(mode=mode)
    (back, back_text), (front, front_text) = marked(), marked()
    outcome = await shell(
        ctx,
        f"echo begun; (exec -a {back_text} sleep 60) & (exec -a {front_text} sleep 60); echo no",
        timeout=1,
    )
    assert outcome.is_error
    assert outcome.text.endswith("begun\n[timed out after 1 s]")
    assert await wait_gone(back) and await wait_gone(front)


@pytest.mark.parametrize("mode", ["auto", "off"])
async def test_cancelling_the_turn_kills_the_command(ctx: ToolContext, mode: SandboxMode) -> None:
    ctx.sandbox = Sandbox(mode=mode)
    (back, back_text), (front, front_text) = marked(), marked()
    command = f"(exec -a {back_text} sleep 60) & (exec -a {front_text} sleep 60)"
    async with anyio.create_task_group() as group:
        group.start_soon(shell, ctx, command)
        await wait_running(back)
        await wait_running(front)
        group.cancel_scope.cancel()
    assert await wait_gone(back) and await wait_gone(front)


async def test_a_background_process_does_not_hold_the_call(ctx: ToolContext) -> None:
    """Without the sandbox, a process left in the background keeps running (in the sandbox it
    ends with the command: test_sandbox.py)."""
    ctx.sandbox = Sandbox(mode="off")
    name, text = marked()
    outcome = await shell(ctx, f"(exec -a {text} sleep 30) & echo done")
    assert outcome.text.startswith("done\n") and outcome.text.endswith("[exit status 0]")
    assert "still run" in outcome.text
    left = running(name)
    assert len(left) == 1  # the call came back while the process went on
    os.kill(left[0], 9)
    assert await wait_gone(name)


async def test_a_huge_output_is_clipped_with_the_exact_count(ctx: ToolContext) -> None:
    outcome = await shell(ctx, "yes 0123456789 | head -c 200000")
    full = "0123456789\n" * (200_000 // 11) + "0123456789"[: 200_000 % 11]
    full += "\n[exit status 0]"
    assert outcome.text == clip_output(full, LIMIT)
    assert len(outcome.log_text("shell")) <= MESSAGE_LIMIT
    assert outcome.log_text("shell") == f"shell: {outcome.text}"  # the model sees what is logged
    found = re.search(
        r"\n\[\.\.\. (\d+) characters cut from the middle of this output \.\.\.\]\n", outcome.text
    )
    assert found is not None
    shown = len(outcome.text) - len(found.group(0))
    assert int(found.group(1)) == len(full) - shown
    assert outcome.text.endswith("[exit status 0]")


async def test_an_enormous_output_costs_bounded_memory_and_clips_the_same(
    ctx: ToolContext,
) -> None:
    outcome = await shell(ctx, "head -c 5000000 /dev/zero | tr '\\0' 'z'; echo; echo END")
    full = "z" * 5_000_000 + "\nEND\n[exit status 0]"
    assert outcome.text == clip_output(full, LIMIT)


# -- input checks -------------------------------------------------------------------------------


async def test_bad_inputs_are_error_outcomes_and_ask_no_one(ctx: ToolContext) -> None:
    asker = ScriptedAsker()
    toolbox = Toolbox(Policy(ToolPolicies(), interactive=True), asker)
    for bad in (
        {},
        {"command": ""},
        {"command": "   "},
        {"command": 5},
        {"command": "true", "timeout": 0},
        {"command": "true", "timeout": 601},
        {"command": "true", "timeout": 1.5},
        {"command": "true", "timeout": True},
        {"command": "true", "timeout": "10"},
        {"command": "true", "cwd": "/"},
        {"command": "a\0b"},
    ):
        outcome = await toolbox.run("shell", bad, ctx)
        assert outcome.is_error and "\n" not in outcome.text, bad
    assert asker.asked == []


# -- permissions --------------------------------------------------------------------------------


async def test_headless_never_runs_shell_without_permission(ctx: ToolContext) -> None:
    marker = ctx.workdir / "marker"
    command = f"touch {marker}"
    willing = ScriptedAsker("always", "always")
    for toolbox in (
        Toolbox(Policy(ToolPolicies()), None),  # the default: ask, and no one to ask
        Toolbox(Policy(ToolPolicies(), interactive=False), willing),  # headless: not asked
        Toolbox(Policy(ToolPolicies(), granted=["write", "edit"]), None),  # other grants
        Toolbox(Policy(ToolPolicies(shell="deny"), granted=["shell"]), None),  # deny wins
    ):
        outcome = await toolbox.run("shell", {"command": command}, ctx)
        assert outcome.is_error
        assert outcome.text.startswith(DENIED)
        assert "\n" not in outcome.text
    assert willing.asked == []
    assert not marker.exists()


async def test_headless_refusal_says_how_to_allow(ctx: ToolContext) -> None:
    outcome = await Toolbox(Policy(ToolPolicies()), None).run("shell", {"command": "true"}, ctx)
    assert "--allow shell" in outcome.text


async def test_an_allow_grant_runs_it(ctx: ToolContext) -> None:
    marker = ctx.workdir / "marker"
    toolbox = Toolbox(Policy(ToolPolicies(), granted=["shell", "write", "edit"]), None)
    outcome = await toolbox.run("shell", {"command": f"touch {marker}"}, ctx)
    assert outcome.text == "[exit status 0]"
    assert marker.exists()


async def test_allow_in_config_runs_it_headless(ctx: ToolContext) -> None:
    toolbox = Toolbox(Policy(ToolPolicies(shell="allow")), None)
    assert (await toolbox.run("shell", {"command": "echo ok"}, ctx)).text == "ok\n[exit status 0]"


async def test_deny_policy_never_runs_even_interactive(ctx: ToolContext) -> None:
    asker = ScriptedAsker("always")
    marker = ctx.workdir / "marker"
    toolbox = Toolbox(Policy(ToolPolicies(shell="deny"), interactive=True), asker)
    outcome = await toolbox.run("shell", {"command": f"touch {marker}"}, ctx)
    assert outcome.is_error and outcome.text.startswith(DENIED)
    assert asker.asked == [] and not marker.exists()


async def test_interactive_once_then_deny(ctx: ToolContext) -> None:
    asker = ScriptedAsker("once", "deny")
    toolbox = Toolbox(Policy(ToolPolicies(), interactive=True), asker)
    first = await toolbox.run("shell", {"command": "echo 1 >> log"}, ctx)
    assert first.text == "[exit status 0]"
    second = await toolbox.run("shell", {"command": "echo 1 >> log"}, ctx)  # asked again
    assert second.is_error and second.text == DENIED
    assert [tool for tool, _ in asker.asked] == ["shell", "shell"]
    assert asker.asked[0][1] == {"command": "echo 1 >> log"}
    assert (ctx.workdir / "log").read_text() == "1\n"


async def test_interactive_always_is_for_this_exact_command(ctx: ToolContext) -> None:
    asker = ScriptedAsker("always", "deny")
    toolbox = Toolbox(Policy(ToolPolicies(), interactive=True), asker)
    for _ in range(3):
        assert not (await toolbox.run("shell", {"command": "echo 1 >> log"}, ctx)).is_error
    other = await toolbox.run("shell", {"command": "echo 2 >> log"}, ctx)
    assert other.is_error
    assert len(asker.asked) == 2
    assert (ctx.workdir / "log").read_text() == "1\n1\n1\n"


async def test_interactive_without_an_asker_refuses(ctx: ToolContext) -> None:
    toolbox = Toolbox(Policy(ToolPolicies(), interactive=True), None)
    assert (await toolbox.run("shell", {"command": "true"}, ctx)).is_error
