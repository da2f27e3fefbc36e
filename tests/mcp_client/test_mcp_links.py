"""The servers' links without a session: the start deadline, the order of the tools offered,
and a server over HTTP that goes away (issue 25 §1)."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import pytest

from evertalk.mcp_client.tools import McpTools
from evertalk.mcp_settings import McpServer, McpSettings
from mcp_servers import FLAKY

pytestmark = pytest.mark.anyio


def flaky(name: str) -> McpServer:
    return McpServer(name, command=sys.executable, args=(str(FLAKY),))


async def test_tools_are_offered_by_server_then_tool_name(tmp_path: Path) -> None:
    settings = McpSettings(servers=(flaky("beta"), flaky("alpha")))
    async with McpTools.open(settings, tmp_path) as mcp:
        changes: list[int] = []
        mcp.on_change = lambda: changes.append(len(mcp.definitions))
        with anyio.fail_after(30):
            await mcp.started()
        names = [tool.name for tool in mcp.definitions]
    tools = ["crash", "echo", "hang", "picture", "pid"]
    assert names == [f"{s}__{t}" for s in ("alpha", "beta") for t in tools]
    assert len(changes) == 2  # once per server: the list changes when a listing comes


async def test_a_server_that_never_answers_its_start_meets_the_deadline(tmp_path: Path) -> None:
    silent = McpServer("silent", command=sys.executable, args=("-c", "import time; time.sleep(60)"))
    warned: list[str] = []
    async with McpTools.open(McpSettings(servers=(silent,), start_timeout=0.5), tmp_path) as mcp:
        mcp.on_warning = warned.append
        with anyio.fail_after(30):
            await mcp.started()
        problems = mcp.problems()
        outcome = await mcp.call("silent__anything", {})
    assert problems == (
        "silent: cannot start: it did not start and list its tools within 0.5 seconds; "
        "trying again in 1 s",
    )
    assert warned == [
        "mcp: the server silent cannot start: it did not start and list its tools within "
        "0.5 seconds"
    ]
    assert outcome.is_error and outcome.text == "there is no tool 'silent__anything'"


async def test_while_a_server_restarts_its_tools_stay_and_say_so(tmp_path: Path) -> None:
    async with McpTools.open(McpSettings(servers=(flaky("flaky"),)), tmp_path) as mcp:
        with anyio.fail_after(30):
            await mcp.started()
        offered = list(mcp.definitions)
        crashed = await mcp.call("flaky__crash", {})
        meanwhile = await mcp.call("flaky__echo", {"text": "hello"})
        assert mcp.definitions == offered
        (problem,) = mcp.problems()
        assert problem.startswith("flaky: stopped: it")  # exited, or stopped during a call
        with anyio.fail_after(30):
            await mcp.link("flaky").ready()
        back = await mcp.call("flaky__echo", {"text": "hello"})
        assert mcp.definitions == offered  # the same listing: the list did not change
    assert crashed.is_error and "stopped during the call" in crashed.text
    assert meanwhile.is_error
    assert meanwhile.text.startswith("the MCP server flaky is restarting (stopped: it")
    assert meanwhile.text.endswith("try the call again in a moment")
    assert "\n" not in meanwhile.text
    assert back.text == "hello" and not back.is_error


async def test_a_server_that_exits_at_start_is_said_with_its_last_words(tmp_path: Path) -> None:
    script = "import sys; sys.stderr.write('warming up\\nno config file found\\n'); sys.exit(1)"
    bad = McpServer("bad", command=sys.executable, args=("-c", script))
    async with McpTools.open(McpSettings(servers=(bad,)), tmp_path) as mcp:
        with anyio.fail_after(30):
            await mcp.started()
        problems = mcp.problems()
    assert problems == ("bad: cannot start: it exited (no config file found); trying again in 1 s",)
    log = tmp_path / "mcp" / "bad.log"
    assert log.read_text() == "warming up\nno config file found\n"
    assert log.stat().st_mode & 0o777 == 0o600
