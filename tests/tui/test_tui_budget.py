"""A daily budget in the app: the status bar shows today's spending beside it, and a message
that would start a turn over it is asked about first (not sending it loses nothing)."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.app import App
from textual.containers import Vertical
from tui_support import MODEL, app_of, enter_line, log_of, running, script, wait_until

from evertalk.slash import RETRY_HINT
from evertalk.tui.budget_screen import BudgetScreen
from evertalk.tui.widgets import NoteRow, PromptInput, StatusBar
from fakes import AnthropicFake, Fail
from fakes import chat as answer
from spending import spent

pytestmark = pytest.mark.anyio


async def test_a_message_over_the_budget_is_asked_about(home: Path) -> None:
    with (home / "config.toml").open("a") as config:
        config.write("\n[budget]\ndaily = 5.00\n")
    spent(home, 6.00, model=MODEL)
    fake = AnthropicFake(script().push(answer("Sent all the same.")))
    async with running(home, fake) as pilot:
        app = app_of(pilot)
        bar = app.query_one(StatusBar)
        await wait_until(pilot, lambda: "$6.00/$5.00" in bar.text)
        await enter_line(pilot, "is it worth it?")
        await wait_until(pilot, lambda: isinstance(app.screen, BudgetScreen))
        said = str(app.screen.query_one("#budget-why").render())
        assert "Today's spending, $6.00, is over the daily budget of $5.00" in said
        await pilot.press("n")
        notes = lambda: [row.text for row in app.query(NoteRow)]  # noqa: E731
        await wait_until(pilot, lambda: any(n.startswith("not sent: today's") for n in notes()))
        assert log_of(home) == []
        # Up brings it back, as with any message that was not sent
        prompt = app.query_one(PromptInput)
        await pilot.press("up")
        assert prompt.text == "is it worth it?"
        await pilot.press("enter")
        await wait_until(pilot, lambda: isinstance(app.screen, BudgetScreen))
        await pilot.press("y")
        await wait_until(pilot, lambda: len(log_of(home)) == 2 and not app.busy)
    assert log_of(home) == [("user", "is it worth it?"), ("ever", "Sent all the same.")]


async def test_without_a_budget_the_bar_shows_the_cost_alone(home: Path) -> None:
    spent(home, 6.00, model=MODEL)
    async with running(home, AnthropicFake(script())) as pilot:
        bar = app_of(pilot).query_one(StatusBar)
        await wait_until(pilot, lambda: "$6.00" in bar.text)
        assert "/$" not in bar.text


async def test_retry_over_the_budget_is_asked_about_too(home: Path) -> None:
    with (home / "config.toml").open("a") as config:
        config.write("\n[budget]\ndaily = 5.00\n")
    fake = AnthropicFake(script().push(Fail(400, "prompt is too odd"), answer("Done.")))
    async with running(home, fake) as pilot:
        app = app_of(pilot)
        await enter_line(pilot, "rename the backups")
        await wait_until(pilot, lambda: RETRY_HINT in [row.text for row in app.query(NoteRow)])
        spent(home, 6.00, model=MODEL)  # another window spent meanwhile
        await enter_line(pilot, "/retry")
        await wait_until(pilot, lambda: isinstance(app.screen, BudgetScreen))
        said = str(app.screen.query_one("#budget-why").render())
        assert said.endswith("Run the turn all the same?")
        await pilot.press("y")
        await wait_until(pilot, lambda: [kind for kind, _ in log_of(home)][-1:] == ["ever"])
    assert [kind for kind, _ in log_of(home)] == ["user", "echo", "ever"]


def dialog_text(app: App[int]) -> str:
    """The words the dialog shows on the screen, its lines joined (its borders left out)."""
    box = app.screen.query_one(Vertical).region
    lines = [strip.text for strip in app.screen._compositor.render_strips()]
    inside = [line[box.x + 1 : box.right - 1] for line in lines[box.y + 1 : box.bottom - 1]]
    return " ".join(" ".join(inside).split())


@pytest.mark.parametrize("width", [160, 60])
async def test_the_budget_question_wraps_and_always_shows(home: Path, width: int) -> None:
    with (home / "config.toml").open("a") as config:
        config.write("\n[budget]\ndaily = 5.00\n")
    spent(home, 6.00, model=MODEL)
    async with running(home, AnthropicFake(script()), size=(width, 30)) as pilot:
        app = app_of(pilot)
        await wait_until(pilot, lambda: "$6.00/$5.00" in app.query_one(StatusBar).text)
        await enter_line(pilot, "is it worth it?")
        await wait_until(pilot, lambda: isinstance(app.screen, BudgetScreen))
        await pilot.pause()
        shown = dialog_text(app)
        assert "([budget] daily in config.toml). Send this message all the same?" in shown
        assert "No (n)" in shown and "Yes (y)" in shown
        await pilot.press("n")
