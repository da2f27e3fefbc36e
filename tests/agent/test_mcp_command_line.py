"""MCP servers from the command line (issue 25 §1): `evertalk mcp add|list|remove`, then a
`-p` turn through the service whose model calls the reference time server, allowed by
`--allow time__*`; `service status` and `mcp list` name a server that cannot start."""

from __future__ import annotations

from pathlib import Path

from test_turn_support import log_of, turn_bodies

from fakes import AnthropicFake, ToolCall, reply
from fakes import chat as answer
from mcp_servers import TIME_SERVER
from served_home import fake, home, run

__all__ = ["fake", "home"]  # the fixtures, used by name


def test_add_list_remove_keep_the_file_s_other_settings(home: Path) -> None:
    before = (home / "config.toml").read_text()
    added = run(home, "mcp", "add", "time", "-e", "TZ=UTC", "--", str(TIME_SERVER), "-x", "y")
    assert added.returncode == 0, added.stderr
    assert "time__TOOL" in added.stdout
    assert run(home, "mcp", "add", "docs", "--url", "http://127.0.0.1:9/mcp").returncode == 0
    listed = run(home, "mcp", "list")
    assert listed.stdout.splitlines() == [
        "docs  http: http://127.0.0.1:9/mcp",
        f"time  stdio: {TIME_SERVER} -x y",
    ]
    again = run(home, "mcp", "add", "time", "--", "true")
    assert again.returncode == 1
    assert "configured already" in again.stderr and len(again.stderr.splitlines()) == 1
    bad = run(home, "mcp", "add", "a__b", "--", "true")
    assert bad.returncode == 1 and "cannot name an MCP server" in bad.stderr
    neither = run(home, "mcp", "add", "empty")
    assert neither.returncode == 2
    assert run(home, "mcp", "remove", "docs").returncode == 0
    assert run(home, "mcp", "remove", "docs").returncode == 1
    text = (home / "config.toml").read_text()
    assert text.startswith(before)  # the user's settings and comments stay as they were
    assert 'env = {TZ = "UTC"}' in text and "docs" not in text
    assert oct((home / "config.toml").stat().st_mode & 0o777) == "0o600"


def test_a_turn_through_the_service_calls_the_time_server(home: Path, fake: AnthropicFake) -> None:
    assert run(home, "mcp", "add", "time", "--", str(TIME_SERVER)).returncode == 0
    fake.behaviour.push(  # type: ignore[attr-defined]
        reply(
            ToolCall(
                "time__convert_time",
                {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"},
            )
        ),
        answer("Noon in London is 21:00 in Tokyo."),
    )
    result = run(home, "-p", "noon UTC in Tokyo?", "--allow", "time__*")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "Noon in London is 21:00 in Tokyo.\n"
    echo = [text for kind, text in log_of(home) if kind == "echo"]
    assert len(echo) == 1 and echo[0].startswith("time__convert_time: {")
    assert "21:00" in echo[0]
    assert "time__convert_time" in [tool["name"] for tool in turn_bodies(fake)[0]["tools"]]


def test_without_the_grant_the_call_is_denied_and_said(home: Path, fake: AnthropicFake) -> None:
    assert run(home, "mcp", "add", "time", "--", str(TIME_SERVER)).returncode == 0
    fake.behaviour.push(  # type: ignore[attr-defined]
        reply(ToolCall("time__get_current_time", {"timezone": "UTC"})), answer("Not allowed.")
    )
    result = run(home, "-p", "what time is it?", "--allow", "time__convert_time")
    assert result.returncode == 0, result.stderr
    assert (
        'Ever wants to call get_current_time of the MCP server time with {"timezone": "UTC"}'
        in result.stderr
    )
    echo = [text for kind, text in log_of(home) if kind == "echo"]
    assert echo == ["time__get_current_time: the user did not allow this call"]


def test_service_status_names_a_server_that_cannot_start(home: Path, fake: AnthropicFake) -> None:
    program = home.parent / "mcp-server"  # there when added, uninstalled since
    program.write_text("#!/bin/sh\n")
    program.chmod(0o755)
    assert run(home, "mcp", "add", "gone", "--", str(program)).returncode == 0
    program.unlink()
    fake.behaviour.push(answer("Hello."))  # type: ignore[attr-defined]
    turn = run(home, "-p", "hi")
    assert turn.returncode == 0, turn.stderr
    assert turn.stdout == "Hello.\n"
    status = run(home, "service", "status")
    assert status.returncode == 0, status.stderr
    (line,) = [line for line in status.stdout.splitlines() if line.startswith("MCP server")]
    assert line.startswith(f"MCP server gone: cannot start: {program}: no such program")
    listed = run(home, "mcp", "list")
    assert listed.stdout.startswith(
        f"gone  stdio: {program}  (not running: cannot start: "
        f"{program}: no such program; trying again in"
    )


def test_add_refuses_a_program_that_is_not_there(home: Path) -> None:
    before = (home / "config.toml").read_bytes()
    for command, why in (
        ("no-such-mcp-server", "`no-such-mcp-server` is not a program on PATH"),
        ("/nonexistent/mcp-server", "/nonexistent/mcp-server is not an executable file"),
    ):
        added = run(home, "mcp", "add", "gone", "--", command)
        assert added.returncode == 2 and added.stderr.startswith(f"evertalk: mcp add gone: {why}")
        assert len(added.stderr.splitlines()) == 1
    assert (home / "config.toml").read_bytes() == before  # nothing was added


def test_unknown_grants_are_still_refused(home: Path) -> None:
    result = run(home, "-p", "x", "--allow", "time__")
    assert result.returncode == 2
    assert "unknown tool 'time__'" in result.stderr
