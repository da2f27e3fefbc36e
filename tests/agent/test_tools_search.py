"""The opt-in `search(query)` tool: offered with `[memory] search = true`, always allowed,
exact validation, hits with their ids and covering view lines (so the model can zoom)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_turn_support import collect_turn, opened, turn_bodies

from evertalk.agent.policy import Policy
from evertalk.agent.tools import Toolbox, ToolContext, ToolOutcome
from evertalk.agent.tools import memory as memory_tools
from evertalk.chat import Chat
from evertalk.config import ToolPolicies
from evertalk.protocol.events import ToolFinished
from evertalk.search_tool import SEARCH
from fakes import AnthropicFake, ToolCall, reply, summarizer
from fakes import Script as FakeScript
from fakes import chat as answer

pytestmark = pytest.mark.anyio


@pytest.fixture
def searching(tmp_path: Path) -> Iterator[ToolContext]:
    """A tool context on a chat that keeps its search index, as with `search = true`."""
    with Chat.open(tmp_path / "chat", search=True) as chat:
        work = tmp_path / "work"
        work.mkdir()
        yield ToolContext(chat=chat, workdir=work, agents_dir=tmp_path / "chat" / "agents")


async def call(ctx: ToolContext, tool_input: Any) -> ToolOutcome:
    toolbox = Toolbox(Policy(ToolPolicies(), interactive=False), None)  # no one to ask
    return await toolbox.run("search", tool_input, ctx)


def enable_search(home: Path) -> None:
    config = home / "config.toml"
    config.write_text(config.read_text() + "search = true\n")  # [memory] is the last table


async def test_hits_name_the_message_and_the_view_line_to_zoom(searching: ToolContext) -> None:
    chat = searching.chat
    for k in range(9):
        chat.append("user", f"note {k}")
    chat.append("tool", "Error: ECONNREFUSED 10.0.0.7:5432")
    outcome = await call(searching, {"query": "ECONNREFUSED 10.0.0.7"})
    assert not outcome.is_error
    header, snippet = outcome.text.splitlines()
    view = chat.core.view.nodes()
    (line,) = [(lv, i) for lv, i in view if i << lv <= 9 < (i + 1) << lv]
    level, index = line
    assert header.startswith("9+1  tool  ")
    assert header.endswith(f"in view line {index << level}+{1 << level}")
    assert "«ECONNREFUSED 10.0.0.7»" in snippet
    zoomed = await Toolbox(Policy(ToolPolicies()), None).run("zoom", {"id": 9, "n": 1}, searching)
    assert "ECONNREFUSED" in zoomed.text  # the id the hit gave opens the message


async def test_no_hits_and_refusals_are_one_line(searching: ToolContext) -> None:
    searching.chat.append("user", "hello")
    outcome = await call(searching, {"query": "walrus"})
    assert not outcome.is_error and outcome.text == "no hits for 'walrus'"
    for bad in (
        {},
        {"query": ""},
        {"query": '- " ('},
        {"query": 3},
        {"query": "x", "limit": 0},
        {"query": "x", "limit": 51},
        {"query": "x", "limit": 2.0},
        {"query": "x", "other": 1},
    ):
        refused = await call(searching, bad)
        assert refused.is_error and refused.text and "\n" not in refused.text, bad


async def test_a_limit_caps_the_hits(searching: ToolContext) -> None:
    for k in range(5):
        searching.chat.append("user", f"gecko number {k}")
    outcome = await call(searching, {"query": "gecko", "limit": 2})
    headers = [line for line in outcome.text.splitlines() if not line.startswith("  ")]
    assert [line.split()[0] for line in headers] == ["4+1", "3+1"]


async def test_off_unless_the_chat_keeps_an_index(tmp_path: Path) -> None:
    with Chat.open(tmp_path / "chat") as chat:
        chat.append("user", "hello")
        ctx = ToolContext(chat=chat, workdir=tmp_path, agents_dir=tmp_path / "agents")
        outcome = await call(ctx, {"query": "hello"})
    assert outcome.is_error and "[memory] search" in outcome.text


async def test_a_big_backlog_is_left_to_the_command_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with Chat.open(tmp_path / "chat") as chat:  # logged while search was off
        for k in range(5):
            chat.append("user", f"old note {k}")
    monkeypatch.setattr(memory_tools, "LIVE_BACKLOG", 3)
    with Chat.open(tmp_path / "chat", search=True) as chat:
        ctx = ToolContext(chat=chat, workdir=tmp_path, agents_dir=tmp_path / "agents")
        outcome = await call(ctx, {"query": "note"})
    assert outcome.is_error
    assert "5 messages behind" in outcome.text and "evertalk memory search" in outcome.text


def test_the_description_puts_the_view_and_zoom_first() -> None:
    text = SEARCH.description
    assert "exact string" in text and "view and zoom" in text
    assert SEARCH.input_schema["required"] == ["query"]


async def test_offered_only_when_on_and_used_in_a_turn(home: Path) -> None:
    def turn_tools(fake: AnthropicFake) -> list[str]:
        return [tool["name"] for tool in turn_bodies(fake)[0]["tools"]]

    off = AnthropicFake(FakeScript().route(lambda c: True, answer("Hi.")))
    async with opened(home, off) as agent:
        agent.submit("hello")
        await collect_turn(agent)
    assert "search" not in turn_tools(off)

    enable_search(home)
    script = FakeScript().route(
        lambda c: c.body.get("tool_choice") in ({"type": "none"}, "none"), summarizer(100)
    )
    fake = AnthropicFake(
        script.push(reply(ToolCall("search", {"query": "hello"})), answer("Found it."))
    )
    async with opened(home, fake) as agent:
        agent.submit("where did I say hello?")
        seen = await collect_turn(agent)
    assert turn_tools(fake)[-1] == "search"
    (finished,) = [event for event in seen if isinstance(event, ToolFinished)]
    assert not finished.is_error
    result = turn_bodies(fake)[1]["messages"][2]["content"][0]
    shown = str(result["content"])
    assert "0+1  user" in shown and "in view line" in shown and "«hello»" in shown
    assert (home / "chat" / "index" / "search.sqlite").exists()
