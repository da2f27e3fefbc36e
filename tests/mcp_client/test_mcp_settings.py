"""`[mcp]` in config.toml, the names the model calls, grants, the question's wording, and the
results the model gets (issue 25 §1)."""

from __future__ import annotations

import base64
from pathlib import Path

import mcp_types as types
import pytest
from flaky_server import png

from evertalk.cli import build_parser
from evertalk.client.asks import request, request_line
from evertalk.config import ConfigError, load_config
from evertalk.grants import covers, parse_grants
from evertalk.mcp_client.names import NAME_MOST, offered_name
from evertalk.mcp_client.results import outcome_of
from evertalk.mcp_settings import McpServer
from evertalk.protocol.replies import Ask
from evertalk.providers.base import Image, Text


def config(home: Path, text: str) -> Path:
    home.mkdir(exist_ok=True)
    (home / "config.toml").write_text('provider = "anthropic"\n' + text)
    return home


def test_servers_are_read_sorted_with_their_deadlines(tmp_path: Path) -> None:
    home = config(
        tmp_path,
        "[mcp]\ncall_timeout = 5\n\n"
        '[mcp.servers.zeta]\ncommand = "z"\nargs = ["-v"]\nenv = { B = "2", A = "1" }\n\n'
        '[mcp.servers.alpha]\nurl = "http://127.0.0.1:8000/mcp"\nenabled = false\n',
    )
    mcp = load_config(home, env={}).mcp
    assert mcp.call_timeout == 5.0 and mcp.start_timeout == 30.0
    assert mcp.servers == (
        McpServer("alpha", url="http://127.0.0.1:8000/mcp", enabled=False),
        McpServer("zeta", command="z", args=("-v",), env=(("A", "1"), ("B", "2"))),
    )
    assert [server.name for server in mcp.enabled] == ["zeta"]


def test_no_table_no_servers(tmp_path: Path) -> None:
    assert load_config(config(tmp_path, ""), env={}).mcp.servers == ()


@pytest.mark.parametrize(
    ("table", "said"),
    [
        ('[mcp.servers.x]\ncommand = "a"\nurl = "http://h/mcp"\n', "either `command`"),
        ("[mcp.servers.x]\nenabled = true\n", "either `command`"),
        ('[mcp.servers.x]\ncommand = "a"\nargs = "b"\n', "`args` must be a list of strings"),
        ('[mcp.servers.x]\ncommand = "a"\nenv = { A = 1 }\n', "`env` must be a table"),
        ('[mcp.servers.x]\nurl = "ftp://h"\n', "`url` must be an http"),
        ('[mcp.servers.x]\ncommand = "a"\ncwd = "/"\n', "unknown setting `cwd`"),
        ('[mcp.servers.a__b]\ncommand = "a"\n', "cannot name an MCP server"),
        ("[mcp]\ncall_timeout = 0\n", "`mcp.call_timeout` must be a positive number"),
        ("[mcp]\nretries = 3\n", "unknown setting `mcp.retries`"),
    ],
)
def test_a_wrong_setting_is_one_line_naming_the_file(tmp_path: Path, table: str, said: str) -> None:
    home = config(tmp_path, table)
    with pytest.raises(ConfigError) as error:
        load_config(home, env={})
    text = str(error.value)
    assert text.startswith(str(home / "config.toml")) and said in text
    assert "\n" not in text


def test_offered_names_fit_every_api() -> None:
    assert offered_name("git", "status") == "git__status"
    assert offered_name("fs", "read.file/v2") == "fs__read_file_v2"
    long_a, long_b = offered_name("s", "x" * 80 + "a"), offered_name("s", "x" * 80 + "b")
    assert len(long_a) == NAME_MOST and long_a != long_b


def test_grants_of_a_server_s_tools() -> None:
    assert parse_grants("shell, time__*, git__status") == ["shell", "time__*", "git__status"]
    for wrong in ("time__", "__x", "ti me__x", "rm"):
        with pytest.raises(ValueError, match="unknown tool"):
            parse_grants(wrong)
    assert covers(["time__*"], "time__convert_time")
    assert not covers(["time__*"], "timer__x")
    assert covers(["git__status"], "git__status") and not covers(["git__status"], "git__log")


def test_the_question_names_the_server_and_shows_the_arguments() -> None:
    frame = Ask(
        id="q", tool="time__get_current_time", input={"timezone": "UTC"}, agent=None, outside=False
    )
    assert request(frame) == "Ever wants to call get_current_time of the MCP server time"
    assert request_line(frame) == (
        'Ever wants to call get_current_time of the MCP server time with {"timezone": "UTC"}'
    )


def test_mcp_alone_still_serves_the_memory() -> None:
    args = build_parser().parse_args(["mcp"])
    assert args.command == "mcp" and args.action is None


def test_results_keep_images_and_name_what_the_model_cannot_take() -> None:
    data = base64.b64encode(png()).decode("ascii")
    result = types.CallToolResult(
        content=[
            types.TextContent(text="a square"),
            types.ImageContent(data=data, mime_type="image/png"),
            types.ImageContent(data=base64.b64encode(b"BM....").decode(), mime_type="image/bmp"),
            types.AudioContent(data="AAAA", mime_type="audio/wav"),
        ]
    )
    outcome = outcome_of(result)
    assert outcome.content == [
        Text(
            "a square\n[an image (image/bmp) the model cannot take was left out]\n"
            "[audio (audio/wav) was left out]"
        ),
        Image("image/png", data),
    ]
    assert not outcome.is_error


def test_a_structured_result_alone_is_given_as_json() -> None:
    result = types.CallToolResult(content=[], structured_content={"hour": 12}, is_error=True)
    outcome = outcome_of(result)
    assert outcome.text == '{\n  "hour": 12\n}' and outcome.is_error
