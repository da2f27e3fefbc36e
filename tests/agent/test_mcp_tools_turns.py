"""Other MCP servers' tools in a session (issue 25 §1): the reference time server installed from
the package registry (stdio), an SDK server on loopback (streamable HTTP), a server that exits
during a call, one that never answers, one that cannot start; what the model is offered, what
the log keeps, and who is asked."""

from __future__ import annotations

import json
import socket
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
import uvicorn
from mcp.server import MCPServer
from test_policy import ScriptedAsker
from test_turn_support import (
    collect_turn,
    log_of,
    opened,
    records_of,
    script,
    turn_bodies,
)

from evertalk.prompts import TOOLS
from evertalk.protocol.events import TurnEnded
from fakes import AnthropicFake, ToolCall, reply
from fakes import chat as answer
from mcp_servers import add_servers, flaky_server, time_server

pytestmark = pytest.mark.anyio

BUILT_IN = [tool.name for tool in TOOLS]


def tool_names(body: dict[str, Any]) -> list[str]:
    return [tool["name"] for tool in body["tools"]]


def echoes(home: Path) -> list[str]:
    return [text for kind, text in log_of(home) if kind == "echo"]


async def test_the_time_server_s_tools_are_offered_and_run(home: Path) -> None:
    time_server(home)
    call = ToolCall("time__get_current_time", {"timezone": "Asia/Tokyo"})
    fake = AnthropicFake(
        script().push(reply("Checking.", call), answer("It is morning in Tokyo."), answer("Ok."))
    )
    async with opened(home, fake, granted=["time__*"]) as agent:
        agent.submit("what time is it in Tokyo?")
        seen = await collect_turn(agent)
        agent.submit("thanks")
        seen += await collect_turn(agent)
    assert [e.reason for e in seen if isinstance(e, TurnEnded)] == ["done", "done"]
    bodies = turn_bodies(fake)
    names = tool_names(bodies[0])
    assert names[: len(BUILT_IN)] == BUILT_IN
    assert names[len(BUILT_IN) :] == ["time__convert_time", "time__get_current_time"]
    offered = bodies[0]["tools"][-1]
    assert offered["input_schema"]["required"] == ["timezone"]
    assert "MCP server time" in offered["description"]
    # the list is part of the cached prefix: the same bytes on every call of every turn
    assert all(json.dumps(body["tools"]) == json.dumps(bodies[0]["tools"]) for body in bodies)
    assert len(bodies) == 3
    (echo,) = echoes(home)
    assert echo.startswith("time__get_current_time: {")
    assert '"timezone": "Asia/Tokyo"' in echo and "+09:00" in echo
    result = bodies[1]["messages"][-1]["content"][0]
    assert result["type"] == "tool_result" and "+09:00" in json.dumps(result)


async def test_without_a_grant_no_one_is_asked_headless(home: Path) -> None:
    time_server(home)
    call = ToolCall("time__get_current_time", {"timezone": "UTC"})
    fake = AnthropicFake(script().push(reply(call), answer("I may not.")))
    async with opened(home, fake) as agent:
        agent.submit("what time is it?")
        await collect_turn(agent)
    (echo,) = echoes(home)
    assert echo == (
        "time__get_current_time: the user did not allow this call: time__get_current_time "
        "needs the user's permission, and there is no one to ask here (it runs with --allow "
        "time__get_current_time, or --allow time__*)"
    )


async def test_the_user_is_asked_and_always_holds(home: Path) -> None:
    flaky_server(home)
    first = ToolCall("flaky__echo", {"text": "one"})
    second = ToolCall("flaky__echo", {"text": "two"})
    fake = AnthropicFake(script().push(reply(first), reply(second), answer("Both said.")))
    asker = ScriptedAsker("always")
    async with opened(home, fake, asker=asker) as agent:
        agent.submit("say one, then two")
        await collect_turn(agent)
    assert asker.asked == [("flaky__echo", {"text": "one"})]  # once: "always" covers the tool
    assert echoes(home) == ["flaky__echo: one", "flaky__echo: two"]


async def test_a_server_that_exits_during_a_call_is_restarted(home: Path) -> None:
    flaky_server(home)
    fake = AnthropicFake(
        script().push(
            reply(ToolCall("flaky__pid", {})),
            reply(ToolCall("flaky__crash", {})),
            answer("It crashed."),
            reply(ToolCall("flaky__pid", {})),
            answer("It is back."),
        )
    )
    async with opened(home, fake, granted=["flaky__*"]) as agent:
        agent.submit("crash it")
        await collect_turn(agent)
        crashed = echoes(home)[1]
        with anyio.fail_after(20):
            await agent.mcp.link("flaky").ready()
        agent.submit("is it back?")
        await collect_turn(agent)
        assert agent.status().mcp_problems == ()
    before, after = echoes(home)[0], echoes(home)[2]
    assert crashed == (
        "flaky__crash: the MCP server flaky stopped during the call; it is restarting, and "
        "the call was not finished"
    )
    assert before.startswith("flaky__pid: ") and after.startswith("flaky__pid: ")
    assert before != after  # another process answers
    failed = [r for r in records_of(home) if r.get("kind") == "echo" and r.get("failed")]
    assert [r["text"] for r in failed] == [crashed]
    bodies = turn_bodies(fake)
    assert all(tool_names(body) == tool_names(bodies[0]) for body in bodies)  # kept meanwhile


async def test_a_call_that_gets_no_answer_meets_the_deadline(home: Path) -> None:
    flaky_server(home, call_timeout=0.5)
    fake = AnthropicFake(
        script().push(
            reply(ToolCall("flaky__hang", {})),
            reply(ToolCall("flaky__echo", {"text": "still here"})),
            answer("Done."),
        )
    )
    async with opened(home, fake, granted=["flaky__*"]) as agent:
        agent.submit("try the slow one")
        (ended,) = [e for e in await collect_turn(agent) if isinstance(e, TurnEnded)]
    assert ended.reason == "done"
    assert echoes(home) == [
        "flaky__hang: the MCP server flaky did not answer within 0.5 seconds ([mcp] "
        "call_timeout in config.toml); the call was given up",
        "flaky__echo: still here",  # the server goes on serving
    ]


async def test_a_server_that_cannot_start_is_a_line_of_the_status(home: Path) -> None:
    add_servers(home, '[mcp.servers.broken]\ncommand = "/nonexistent/mcp-server"\n')
    time_server(home)
    fake = AnthropicFake(script().push(answer("Hello.")))
    async with opened(home, fake) as agent:
        agent.submit("hi")
        (ended,) = [e for e in await collect_turn(agent) if isinstance(e, TurnEnded)]
        problems = agent.status().mcp_problems
    assert ended.reason == "done"
    assert len(problems) == 1
    assert problems[0].startswith(
        "broken: cannot start: /nonexistent/mcp-server: no such program; trying again in"
    )
    assert tool_names(turn_bodies(fake)[0])[len(BUILT_IN) :] == [
        "time__convert_time",
        "time__get_current_time",
    ]


async def test_images_from_a_server_stay_images(home: Path) -> None:
    flaky_server(home)
    fake = AnthropicFake(script().push(reply(ToolCall("flaky__picture", {})), answer("Red.")))
    async with opened(home, fake, granted=["flaky__picture"]) as agent:
        agent.submit("show me")
        await collect_turn(agent)
    result = turn_bodies(fake)[1]["messages"][-1]["content"][0]
    kinds = [block["type"] for block in result["content"]]
    assert kinds == ["text", "image"]
    assert result["content"][1]["source"]["media_type"] == "image/png"
    (record,) = [r for r in records_of(home) if r.get("kind") == "echo"]
    assert record["text"] == "flaky__picture: a red square"
    assert len(record["images"]) == 1
    assert (home / "chat" / "images" / record["images"][0]).is_file()


# -- streamable HTTP --------------------------------------------------------------------------


def notes_server() -> MCPServer:
    server = MCPServer("notes")

    @server.tool()
    def lookup(word: str) -> str:
        """What the notes say of a word."""
        return f"the notes say {word} is blue"

    return server


@pytest.fixture
def http_server() -> Iterator[str]:
    """An SDK server over streamable HTTP on loopback, in a thread of its own; its URL."""
    app = notes_server().streamable_http_app()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen()  # connections wait in the backlog until uvicorn takes them
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{port}/mcp"
    finally:
        server.should_exit = True
        thread.join(10)
        sock.close()


async def test_a_server_over_streamable_http(home: Path, http_server: str) -> None:
    add_servers(home, f'[mcp.servers.notes]\nurl = "{http_server}"\n')
    call = ToolCall("notes__lookup", {"word": "sky"})
    fake = AnthropicFake(script().push(reply(call), answer("Blue.")))
    async with opened(home, fake, granted=["notes__lookup"]) as agent:
        agent.submit("what do the notes say of the sky?")
        await collect_turn(agent)
    assert tool_names(turn_bodies(fake)[0])[len(BUILT_IN) :] == ["notes__lookup"]
    assert echoes(home) == ["notes__lookup: the notes say sky is blue"]


async def test_a_token_the_server_is_started_with_stays_out_of_the_log(home: Path) -> None:
    token = "tok-0123456789abcdef"
    flaky_server(home, env=f'{{ NOTES_API_TOKEN = "{token}", TZ = "UTC" }}')
    call = ToolCall("flaky__echo", {"text": f"my token is {token}, my zone UTC"})
    fake = AnthropicFake(script().push(reply(call), answer("Said.")))
    async with opened(home, fake, granted=["flaky__echo"]) as agent:
        agent.submit("say it")
        await collect_turn(agent)
    assert echoes(home) == ["flaky__echo: my token is [redacted], my zone UTC"]
    assert token not in json.dumps(turn_bodies(fake)[1]["messages"][-1])
