"""The app, driven as a user drives it: `/image` with a path as a terminal drops it, `/memory`
with words it does not take, `/model` with the models the server lists, `/help` on the status
bar's words, and the session's cost kept when the service reopens the chat on new settings."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from tui_support import (
    API_KEY,
    HOSTS,
    MODEL,
    agent_of,
    app_of,
    command_row,
    enter_line,
    running,
    script,
    wait_until,
    workdir_of,
    write_config,
)

from evertalk.protocol.replies import Ok
from evertalk.protocol.requests import Reopen
from evertalk.tui.status import dollars
from evertalk.tui.widgets import ReplyView, StatusBar
from fakes import AnthropicFake
from fakes import chat as answer
from providers.test_server_info import Answer
from providers.test_server_info import running as raw_server

pytestmark = pytest.mark.anyio

PNG = b"\x89PNG\r\n\x1a\n" + b"\0" * 30


async def test_image_takes_a_dropped_path_and_clear_takes_nothing_more(home: Path) -> None:
    picture = workdir_of(home) / "screen shot.png"
    picture.write_bytes(PNG)
    async with running(home, AnthropicFake(script())) as pilot:
        app = app_of(pilot)
        row = await command_row(pilot, f"/image '{picture}' ")
        assert row.text == "attached screen shot.png (38 B); it goes with your next message"
        row = await command_row(pilot, "/image screen\\ shot.png")  # from the working folder
        assert row.text.startswith("attached screen shot.png")
        assert app.prompt.border_title == "2 images attached: screen shot.png, screen shot.png"
        row = await command_row(pilot, "/image clear extra")
        assert row.has_class("error")
        assert row.text == "usage: /image [PATH|clear]: /image clear takes nothing after it"
        assert len(app.attachments.files) == 2
        assert (await command_row(pilot, "/image clear")).text == "dropped 2 images"


async def test_memory_with_other_words_gives_its_usage(home: Path) -> None:
    async with running(home, AnthropicFake(script())) as pilot:
        row = await command_row(pilot, "/memory foo")  # answered by the service, shown by the app
        assert row.has_class("error")
        assert row.text == "usage: /memory, /memory zoom ID N or /memory search QUERY"


async def test_help_explains_the_status_bar(home: Path) -> None:
    async with running(home, AnthropicFake(script())) as pilot:
        text = (await command_row(pilot, "/help")).text
        bar = text[text.index("\nThe status bar\n") :]
        assert "summaries: idle" in bar and "merging" in bar and "tools unused" in bar


MODELS = {"data": [{"id": "claude-opus-5-5-20260301"}, {"id": MODEL}], "has_more": False}


async def test_model_lists_the_servers_models_and_refuses_a_name_it_lacks(home: Path) -> None:
    routes = {("GET", "/v1/models?limit=1000"): Answer(body=MODELS)}
    with raw_server(routes) as server:
        write_config(home, base_url=server.url)  # what /model asks; turns go to the fake
        async with running(home, AnthropicFake(script())) as pilot:
            app = app_of(pilot)
            shown = (await command_row(pilot, "/model")).text
            assert shown.splitlines() == [
                f"turn model: {MODEL}",
                "set it with /model NAME",
                f"the server has: claude-opus-5-5-20260301, {MODEL}",
            ]
            row = await command_row(pilot, "/model claude-opsu-5-5")
            assert row.has_class("error")
            said = "unknown model claude-opsu-5-5; the server has: "
            assert row.text.startswith(said)
            assert sorted(row.text.removeprefix(said).split(", ")) == sorted(
                model["id"] for model in MODELS["data"]
            )
            assert agent_of(app).model == MODEL
            row = await command_row(pilot, "/model claude-opus-5-5")  # its name without the date
            assert row.text.startswith("turn model: claude-opus-5-5 from the next turn on")
            assert agent_of(app).model == "claude-opus-5-5"
    asked = server.asked
    assert len(asked) == 1  # the list is kept: /model again does not wait for the server
    headers = {name.lower(): value for name, value in asked[0].headers.items()}
    assert headers["x-api-key"] == API_KEY and headers["anthropic-version"] == "2023-06-01"


def shown_cost(bar: StatusBar) -> float:
    found = re.search(r"\$(\d+\.\d+)", bar.text)
    assert found is not None, bar.text
    return float(found[1])


def at_least(bar: StatusBar, cost: float) -> bool:
    """Whether the bar shows `cost` or more (summaries may add to it), as it rounds it."""
    return shown_cost(bar) >= float(dollars(cost).lstrip("$")) > 0


async def test_the_cost_stays_when_the_service_reopens_the_chat(home: Path) -> None:
    fake = AnthropicFake(script().push(answer("Hello.")))
    async with running(home, fake) as pilot:
        app = app_of(pilot)
        first = agent_of(app)
        await enter_line(pilot, "hi")
        await wait_until(pilot, lambda: [v.source for v in app.query(ReplyView)] == ["Hello."])
        await wait_until(pilot, lambda: not first.busy)
        spent = first.status().turn_cost
        assert spent > 0
        bar = app.query_one(StatusBar)
        await wait_until(pilot, lambda: at_least(bar, spent))

        assert app.remote is not None
        await app.remote.request(Reopen(), Ok)  # as /setup has it, once it saved
        host = HOSTS[id(app)]

        def reopened() -> bool:
            service = host.service
            return service is not None and service.agent not in (None, first)

        await wait_until(pilot, reopened)
        assert agent_of(app).status().turn_cost == pytest.approx(spent)
        await pilot.pause(1.2)  # two looks at the status since the reopen
        assert at_least(bar, spent)
