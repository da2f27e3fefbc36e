"""`evertalk mcp` end to end: the official MCP client of the SDK drives the server over stdio,
as Claude Code or Codex would, and the server is a client of the real service (which it starts
when none runs), against the Anthropic fake on loopback. Each test's service is stopped at its
end."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, TypeVar

import anyio
import msgspec
import pytest
from mcp import Client, StdioServerParameters
from mcp_types import CallToolResult, Implementation, TextContent

from agent.test_turn_support import log_of, workdir_beside
from evertalk.client.connection import connect
from evertalk.mcp_server import PART_BYTES, Refused, format_status, view_part, whole
from evertalk.protocol import frames
from evertalk.protocol.replies import Status, View
from evertalk.protocol.requests import GetStatus, GetView, Request
from fakes import AnthropicFake, slow
from fakes import chat as answer
from service.test_service_socket import environment, fake, home, start_p, wait_until
from service.test_service_socket import run as evertalk

__all__ = ["fake", "home"]  # the fixtures, used by name

R = TypeVar("R", bound=msgspec.Struct)

TOOLS = ["memory_view", "memory_zoom", "memory_date", "memory_status", "memory_note"]
DATE = re.compile(r"^\d{4}-\d\d-\d\d [A-Z][a-z]+day \d\d:\d\d:\d\d [+-]\d\d:\d\d$")


def ask(home: Path, request: Request, kind: type[R]) -> R:
    """The service's reply to one request, over a connection of the test's own."""
    with connect(home, "test") as connection:
        return connection.request(request, kind)


@asynccontextmanager
async def mcp_client(home: Path, *args: str, mode: str = "auto") -> AsyncIterator[Client]:
    """The MCP server of `home` as a subprocess, with the SDK's client connected over stdio
    (`mode="legacy"`: with the initialize handshake, as clients of older protocol versions)."""
    parameters = StdioServerParameters(
        command=sys.executable,
        args=["-m", "evertalk.mcp_server", "--home", str(home), *args],
        env=environment(home),
        cwd=workdir_beside(home),
    )
    client = Client(
        parameters,
        client_info=Implementation(name="test-agent", version="1.0"),
        read_timeout_seconds=90,
        mode=mode,
    )
    async with client:
        yield client


def text_of(result: CallToolResult) -> str:
    assert len(result.content) == 1
    block = result.content[0]
    assert isinstance(block, TextContent)
    return block.text


async def call(client: Client, name: str, **arguments: Any) -> str:
    """A tool call that must work: its text."""
    result = await client.call_tool(name, arguments)
    assert not result.is_error, text_of(result)
    return text_of(result)


async def refused(client: Client, name: str, **arguments: Any) -> str:
    """A tool call that must fail: its one-line error."""
    result = await client.call_tool(name, arguments)
    assert result.is_error, text_of(result)
    message = text_of(result)
    assert "\n" not in message and "Traceback" not in message
    return message


def chat_of_two(home: Path, fake: AnthropicFake) -> None:
    """Messages 0 (the user's) and 1 (Ever's), through the service."""
    fake.behaviour.push(answer("Nightly backups go to /srv/backup at 02:00."))  # type: ignore[attr-defined]
    done = evertalk(home, "-p", "Where do the nightly backups go?")
    assert done.returncode == 0, done.stderr


def test_the_tools_are_listed_with_schemas_and_descriptions_for_a_newcomer(home: Path) -> None:
    async def main() -> None:
        async with mcp_client(home) as client:
            assert client.server_info is not None and client.server_info.name == "evertalk"
            assert client.instructions and "memory_zoom" in client.instructions
            tools = {tool.name: tool for tool in (await client.list_tools()).tools}
            assert sorted(tools) == sorted(TOOLS)
            for tool in tools.values():
                assert tool.description and "evertalk" in tool.description
                assert tool.annotations is not None
            view, zoom, date = tools["memory_view"], tools["memory_zoom"], tools["memory_date"]
            assert "id+n|text" in (view.description or "")
            assert "`id+1|kind: text`" in (zoom.description or "")
            assert zoom.input_schema["required"] == ["id", "n"]
            properties = zoom.input_schema["properties"]
            assert properties["id"]["type"] == properties["n"]["type"] == "integer"
            assert (properties["id"]["minimum"], properties["n"]["minimum"]) == (0, 1)
            assert date.input_schema["required"] == ["id"]
            assert "required" not in view.input_schema  # `part` is optional
            assert tools["memory_status"].input_schema.get("properties") == {}
            note = tools["memory_note"]
            assert note.input_schema["required"] == ["text"]
            assert note.input_schema["properties"]["text"]["type"] == "string"
            assert "for good" in (note.description or "")
            # a note is not part of Ever's turn: it is logged at once, and nothing says it waits
            assert "even while Ever is in the middle of a turn" in (note.description or "")
            for tool in tools.values():
                assert "waits" not in (tool.description or "")
            for name in ("memory_view", "memory_zoom", "memory_date", "memory_status"):
                assert tools[name].annotations.read_only_hint is True  # type: ignore[union-attr]
            assert note.annotations.read_only_hint is False  # type: ignore[union-attr]

    anyio.run(main)


def test_the_server_starts_the_service_reads_the_memory_and_refuses_bad_ids(
    home: Path, fake: AnthropicFake
) -> None:
    assert "no evertalk service is running" in evertalk(home, "service", "status").stdout

    async def empty() -> None:
        async with mcp_client(home) as client:
            status = await call(client, "memory_status")
            assert status.splitlines()[0] == "messages: 0 (none yet)"
            assert "Ever: not in a turn" in status

    anyio.run(empty)
    assert evertalk(home, "service", "status").stdout.startswith("evertalk service (pid ")
    chat_of_two(home, fake)

    async def main() -> None:
        async with mcp_client(home) as client:
            before = ask(home, GetView(), View).text
            view = await call(client, "memory_view")
            assert view in (before, ask(home, GetView(), View).text)  # as Ever sees it
            lines = view.split("\n")
            assert lines[0] == "<chat>" and lines[-1] == "</chat>"
            assert re.fullmatch(r"0\+(1|2)\|.+", lines[1]), lines
            assert await call(client, "memory_zoom", id=0, n=1) == (
                "0+1|user: Where do the nightly backups go?"
            )
            ever = await call(client, "memory_zoom", id="1", n=1)  # digits in a string do
            assert ever == "1+1|ever: Nightly backups go to /srv/backup at 02:00."
            halves = (await call(client, "memory_zoom", id=0, n=2)).split("\n")
            assert [line.split("|")[0] for line in halves] == ["0+1", "1+1"]
            assert DATE.match(await call(client, "memory_date", id=1))
            status = await call(client, "memory_status")
            assert status.splitlines()[0] == "messages: 2 (ids 0 to 1)"
            assert re.search(r"^view: [\d,]+ bytes of summaries", status, re.MULTILINE)
            assert re.search(r"^service: pid \d+, evertalk ", status, re.MULTILINE)
            # bad ids: one line each, from the service or from the server itself
            assert "power of 2" in await refused(client, "memory_zoom", id=0, n=3)
            assert "multiple of n" in await refused(client, "memory_zoom", id=1, n=2)
            assert "past the end of the chat (2 messages)" in await refused(
                client, "memory_zoom", id=2, n=1
            )
            assert "past the end" in await refused(client, "memory_zoom", id=0, n=4)
            assert "multiple of n" in await refused(client, "memory_zoom", id=-1, n=1)
            assert await refused(client, "memory_zoom", id=True, n=1) == (
                "id must be a whole number, not true"
            )
            assert await refused(client, "memory_zoom", id=0, n=1.5) == (
                "n must be a whole number, not 1.5"
            )
            assert "whole number" in await refused(client, "memory_date", id="seven")
            assert "between 0 and 1" in await refused(client, "memory_date", id=2)
            assert "between 0 and 1" in await refused(client, "memory_date", id=-3)
            assert "part must be between 1 and 1" in await refused(client, "memory_view", part=2)
            assert "empty" in await refused(client, "memory_note", text="  \n ")
            # the server is still there after them all
            assert (await call(client, "memory_zoom", id=0, n=1)).startswith("0+1|user: ")

    anyio.run(main)


def test_a_note_lands_at_the_end_of_the_chat_and_the_view_shows_it(
    home: Path, fake: AnthropicFake
) -> None:
    chat_of_two(home, fake)
    note = "The user chose PostgreSQL 16 for the billing service (decided in Claude Code)."

    async def main() -> None:
        async with mcp_client(home, mode="legacy") as client:  # with an initialize handshake
            assert await call(client, "memory_note", text=note) == (
                "noted: the note is message 2 of the chat"
            )
            assert (await call(client, "memory_zoom", id=2, n=1)) == (
                f"2+1|note: [from test-agent via MCP] {note}"
            )
            status = await call(client, "memory_status")
            assert status.splitlines()[0] == "messages: 3 (ids 0 to 2)"

            async def shown() -> bool:
                return "[from test-agent via MCP] The user chose PostgreSQL 16" in await call(
                    client, "memory_view"
                )

            deadline = time.monotonic() + 30
            while not await shown():  # a short note is its own summary, once the tree has it
                assert time.monotonic() < deadline, "the note never showed in the view"
                await anyio.sleep(0.1)

    anyio.run(main)
    assert log_of(home)[2:] == [("note", f"[from test-agent via MCP] {note}")]


def test_the_server_works_beside_another_client_and_across_a_service_restart(
    home: Path, fake: AnthropicFake
) -> None:
    chat_of_two(home, fake)

    async def main() -> None:
        # a connection held open all along, as the terminal app holds one
        with connect(home, "app") as app:
            async with mcp_client(home) as client:
                status = await call(client, "memory_status")
                assert ", 2 clients connected" in status  # the app, and this call's own
                first = re.search(r"service: pid (\d+)", status)
                assert first is not None
                stopped = await anyio.to_thread.run_sync(lambda: evertalk(home, "service", "stop"))
                assert stopped.returncode == 0, stopped.stderr
                # the next call starts a new service, as the first one did
                assert (await call(client, "memory_zoom", id=0, n=1)).startswith("0+1|user: ")
                again = re.search(r"service: pid (\d+)", await call(client, "memory_status"))
                assert again is not None and again[1] != first[1]
            del app

    anyio.run(main)


def busy(home: Path) -> bool:
    return ask(home, GetStatus(), Status).busy


def test_a_note_during_a_turn_is_logged_at_once(home: Path, fake: AnthropicFake) -> None:
    chat_of_two(home, fake)
    fake.behaviour.push(slow(4, answer("The backup script is fixed.")))  # type: ignore[attr-defined]
    turns: list[subprocess.Popen[str]] = []

    async def main() -> None:
        async with mcp_client(home) as client:
            await call(client, "memory_status")  # the server runs: the turn starts now
            turns.append(start_p(home, "Fix the backup script."))
            await anyio.to_thread.run_sync(lambda: wait_until(lambda: busy(home), "the turn"))
            assert "Ever: working on a turn" in await call(client, "memory_status")
            answered = await call(client, "memory_note", text="Codex rotated the logs.")
            assert answered == "noted: the note is message 3 of the chat"
            assert busy(home)  # it did not wait for the turn: not part of it

    try:
        anyio.run(main)
        assert turns[0].wait(timeout=60) == 0
    finally:
        for turn in turns:
            turn.kill()
            turn.communicate()
    assert log_of(home)[2:] == [
        ("user", "Fix the backup script."),
        ("note", "[from test-agent via MCP] Codex rotated the logs."),
        ("ever", "The backup script is fixed."),
    ]


def test_a_service_that_cannot_start_is_a_tool_error(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "config.toml").write_text("this is = not [valid toml\n")

    async def main() -> None:
        async with mcp_client(home) as client:
            message = await refused(client, "memory_status")
            assert message.startswith("evertalk service: ")

    anyio.run(main)


def test_a_large_view_comes_in_parts_of_whole_lines_newest_by_default() -> None:
    lines = [f"{i}+1|user: {'x' * 990}" for i in range(100)]  # about 100 KB
    view = "\n".join(["<chat>", *lines, "</chat>"])
    newest = view_part(view, None)
    head, *shown = newest.split("\n")
    assert head.startswith("[part 4 of 4 of the view, the newest lines; part=3 has the lines")
    assert shown[-1] == "</chat>" and shown[0] in lines
    parts = [view_part(view, k).split("\n") for k in (1, 2, 3, 4)]
    assert parts[0][0] == "[part 1 of 4 of the view, the oldest lines; part=2 the lines after]"
    assert parts[1][0].startswith("[part 2 of 4 of the view, older lines; part=1 has")
    assert [line for part in parts for line in part[1:]] == view.split("\n")  # nothing lost
    assert all(len("\n".join(part[1:]).encode()) <= PART_BYTES for part in parts)
    assert view_part("<chat>\n0+1|user: hi\n</chat>", None) == "<chat>\n0+1|user: hi\n</chat>"
    with pytest.raises(Refused, match="part must be between 1 and 4"):
        view_part(view, 5)


def test_the_status_reads_as_lines_and_leaves_out_fields_it_does_not_know() -> None:
    frame = {
        "type": "status",
        "rid": 3,
        "pid": 4100,
        "version": "0.1.0",
        "clients": 1,
        "messages": 1843,
        "model": "claude-sonnet-5-5",
        "view_bytes": 84210,
        "view_ceiling": 128000,
        "view_floor": 64000,
        "merging": False,
        "view_merges": 911,
        "compactor_running": 2,
        "compactor_queued": 5,
        "cost": 0.4127,
        "turn_cost": 0.3318,
        "busy": True,
        "subagents": 1,
        "compactor_failed": 1,
        "compactor_error": "12+1: overloaded",
        "catching_up": {"to_go": 1204, "eta_seconds": 1500.0},
        "tools_unused": False,
        "shiny": [1, 2],
    }
    status = frames.decode_frame(json.dumps(frame).encode())
    assert isinstance(status, Status)
    assert format_status(status).split("\n") == [
        "messages: 1,843 (ids 0 to 1,842)",
        "view: 84,210 bytes of summaries; past 128,000, merges of older lines bring it down "
        "to 64,000",
        "merges so far: 911",
        "Ever: working on a turn",
        "subagents at work: 1",
        "catching up: 1,204 summaries to go, about 25 min, 1 failed",
        "summaries: 2 running, 5 queued, 1 failed",
        "latest summary failure: 12+1: overloaded",
        "turn model: claude-sonnet-5-5",
        "spent today: $0.4127 (turns and subagents since the service started: $0.3318)",
        "service: pid 4100, evertalk 0.1.0, 1 client connected",
    ]


def test_ids_are_whole_numbers_or_their_digits() -> None:
    assert [whole("id", value) for value in (0, 7, "12", " 3 ")] == [0, 7, 12, 3]
    for value, shown in ((True, "true"), (1.0, "1.0"), ("1e3", '"1e3"'), (None, "null")):
        with pytest.raises(Refused) as refusal:
            whole("id", value)
        assert str(refusal.value) == f"id must be a whole number, not {shown}"


def test_importing_the_module_leaves_the_sdk_for_the_server(tmp_path: Path) -> None:
    code = (
        "import sys, evertalk.mcp_server\n"
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'mcp', 'mcp_types', 'pydantic'}))"
    )
    found = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=60
    )
    assert (found.returncode, found.stdout) == (0, "[]\n"), found.stderr
