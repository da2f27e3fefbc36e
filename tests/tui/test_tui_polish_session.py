"""Leaving, mistyped commands, and what the session cost (issue 15, items 2, 6 and 11): Ctrl+D
during a turn asks to be pressed again (and the turn goes on in the service), a command close
to a known one is named, Tab on a prefix that several commands share lists them, the window
shows the folder its tools work in, and on exit one line says what the session cost."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from tui_support import (
    agent_of,
    app_of,
    enter_line,
    log_of,
    running,
    script,
    type_text,
    wait_until,
    workdir_of,
)

from evertalk.tui.app import folder_shown
from evertalk.tui.status import dollars
from evertalk.tui.widgets import CommandHint, OutputRow, PromptInput, ReplyView
from fakes import AnthropicFake, slow
from fakes import chat as answer

pytestmark = pytest.mark.anyio

HELP_TAIL = "/help lists the commands (// sends a message that starts with /)"


async def test_ctrl_d_during_a_turn_asks_first_and_the_turn_goes_on(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = AnthropicFake(script().push(slow(1.5, answer("Done anyway."))))
    said: list[str] = []
    async with running(home, fake) as pilot:
        app = app_of(pilot)
        agent = agent_of(app)

        def notify(message: str, **options: Any) -> None:
            said.append(message)

        monkeypatch.setattr(app, "notify", notify)
        await enter_line(pilot, "a slow one")
        await wait_until(pilot, lambda: agent.busy and app.busy)
        await pilot.press("ctrl+d")
        await pilot.pause(0.1)
        assert app.is_running
        assert said == [
            "A turn is running: Ctrl+D again quits. The turn goes on in the service "
            "(Ctrl+C cancels it)."
        ]
        await pilot.press("ctrl+d")
        await wait_until(pilot, lambda: not app.is_running)
        summary = app.summary()
        assert summary is not None and summary.endswith("; a turn goes on in the service")
        with anyio.fail_after(10):  # the window has gone; the service finishes the turn
            while agent.busy:
                await anyio.sleep(0.05)
    assert log_of(home) == [("user", "a slow one"), ("ever", "Done anyway.")]


async def test_ctrl_d_on_an_idle_empty_input_quits_at_once(home: Path) -> None:
    async with running(home, AnthropicFake(script())) as pilot:
        app = app_of(pilot)
        await pilot.press("ctrl+d")
        await wait_until(pilot, lambda: not app.is_running)
        assert app.summary() == (
            "this session: nothing sent; the chat spent $0.00 meanwhile "
            "(any window's turns, subagents, summaries)"
        )


async def test_a_mistyped_command_names_the_close_ones(home: Path) -> None:
    async with running(home, AnthropicFake(script())) as pilot:
        app = app_of(pilot)
        for typed, said in (
            ("/agent", "unknown command /agent: did you mean /agents? "),
            ("/qiut", "unknown command /qiut: did you mean /quit? "),
            ("/mem", "unknown command /mem: did you mean /memory or /memory-model? "),
            ("/exit", "unknown command /exit: did you mean /quit? "),
        ):
            count = len(app.query(OutputRow))
            await enter_line(pilot, typed)
            await wait_until(pilot, lambda count=count: len(app.query(OutputRow)) > count)
            shown = app.query(OutputRow).last().text
            assert shown.startswith(said), shown
            assert shown.endswith(HELP_TAIL)
        count = len(app.query(OutputRow))
        await enter_line(pilot, "/frobnicate")
        await wait_until(pilot, lambda: len(app.query(OutputRow)) > count)
        assert app.query(OutputRow).last().text == (
            "unknown command /frobnicate: /help lists the commands "
            "(// sends a message that starts with /)"
        )


async def test_tab_on_a_prefix_of_several_commands_lists_them(home: Path) -> None:
    async with running(home, AnthropicFake(script())) as pilot:
        app = app_of(pilot)
        prompt = app.query_one(PromptInput)
        hint = app.query_one(CommandHint)
        await type_text(pilot, "/i")
        assert prompt.suggestion == ""
        await pilot.press("tab")
        assert prompt.text == "/i" and prompt.has_focus  # neither picked, the focus stays
        listed = str(hint.render())
        assert hint.display and "/image" in listed and "/instructions" in listed
        await type_text(pilot, "n")
        await pilot.press("tab")
        assert prompt.text == "/instructions"
        prompt.clear()
        await type_text(pilot, "/me")  # what /memory, /memory zoom and /memory-model share
        await pilot.press("tab")
        assert prompt.text == "/memory"
        await pilot.press("tab")
        assert prompt.text == "/memory" and prompt.has_focus
        await type_text(pilot, "-")
        await pilot.press("tab")
        assert prompt.text == "/memory-model "


async def test_the_window_shows_its_folder_and_says_the_cost_on_exit(home: Path) -> None:
    fake = AnthropicFake(script().push(answer("Noted."), answer("Noted again.")))
    async with running(home, fake) as pilot:
        app = app_of(pilot)
        prompt = app.query_one(PromptInput)
        assert prompt.border_subtitle == folder_shown(workdir_of(home))
        assert str(workdir_of(home)).endswith(str(prompt.border_subtitle).lstrip("…"))
        agent = agent_of(app)
        for text, reply in (("remember the milk", "Noted."), ("and the eggs", "Noted again.")):
            await enter_line(pilot, text)
            await wait_until(pilot, lambda reply=reply: app.query(ReplyView) and not agent.busy)
            await wait_until(pilot, lambda reply=reply: app.query(ReplyView).last().source == reply)
        spent = agent.status().cost
        assert spent > 0
        await enter_line(pilot, "/quit")
        await wait_until(pilot, lambda: not app.is_running)
        assert app.summary() == (
            f"this session: 2 messages sent; the chat spent {dollars(spent)} meanwhile "
            "(any window's turns, subagents, summaries)"
        )


def test_a_long_folder_shows_its_end() -> None:
    deep = Path("/srv") / "projects" / ("a-very-long-folder-name-" * 3) / "src"
    shown = folder_shown(deep)
    assert len(shown) == 50 and shown.startswith("…") and shown.endswith("-name-/src")
    assert folder_shown(Path.home() / "notes") == "~/notes"
