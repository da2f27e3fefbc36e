"""The permission dialog: its question worded for the tool, a `write` over an existing file
shown as a diff and said to replace it, a new file said to be created; and the y / n / a keys,
which answer only once the grace period is over."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.pilot import Pilot
from textual.widgets import Static
from tui_support import (
    agent_of,
    app_of,
    enter_line,
    running,
    script,
    wait_until,
    workdir_of,
    write_config,
)

from evertalk.agent.policy import DENIED
from evertalk.tui.widgets import PermissionScreen, ReplyView, ToolRow
from fakes import AnthropicFake, ToolCall, reply
from fakes import chat as answer

pytestmark = pytest.mark.anyio


async def next_dialog(
    pilot: Pilot[int], before: PermissionScreen | None = None
) -> PermissionScreen:
    """The dialog up after `before` (a new one), once it answers keys."""
    app = app_of(pilot)

    def up() -> bool:
        return isinstance(app.screen, PermissionScreen) and app.screen is not before

    await wait_until(pilot, up)
    dialog = app.screen
    assert isinstance(dialog, PermissionScreen)
    await wait_until(pilot, lambda: dialog.answerable)
    return dialog


def text_of(dialog: PermissionScreen, selector: str) -> str:
    """The text a label of the dialog shows (a Label is a Static)."""
    return str(dialog.query_one(selector, Static).render())


async def test_y_allows_once_n_denies_and_a_allows_always(home: Path) -> None:
    again, other = {"command": "echo again"}, {"command": "echo other"}
    calls = [ToolCall("shell", again), ToolCall("shell", again)]
    calls += [ToolCall("shell", other), ToolCall("shell", other)]
    fake = AnthropicFake(script().push(reply(*calls), answer("Done.")))
    async with running(home, fake) as pilot:
        app = app_of(pilot)
        await enter_line(pilot, "run them")
        first = await next_dialog(pilot)
        assert text_of(first, "#question") == "Ever wants to run a shell command:"
        assert text_of(first, "#call") == "$ echo again"
        assert "y allows it once, a always, n or Esc denies" in text_of(first, "#keys")
        await pilot.press("y")  # once: the same command asks again
        second = await next_dialog(pilot, first)
        await pilot.press("n")
        third = await next_dialog(pilot, second)
        assert text_of(third, "#call") == "$ echo other"
        await pilot.press("a")  # always this command: its second call runs unasked
        await wait_until(
            pilot,
            lambda: (
                not agent_of(app).busy
                and [view.source for view in app.query(ReplyView)][-1:] == ["Done."]
            ),
        )
        rows = list(app.query(ToolRow))
        assert [(row.summary, row.is_error) for row in rows] == [
            ("echo again", False),
            ("echo again", True),
            ("echo other", False),
            ("echo other", False),
        ]
        assert DENIED in rows[1].output_text
        assert not isinstance(app.screen, PermissionScreen)
        assert app.prompt.text == ""  # the answering keys went nowhere else


async def test_a_write_over_a_file_shows_the_diff_and_a_new_one_its_lines(home: Path) -> None:
    work = workdir_of(home)
    (work / "app.py").write_text("one\ntwo\nthree\n")
    calls = [ToolCall("write", {"path": "app.py", "content": "one\n2\nthree\n"})]
    calls.append(ToolCall("write", {"path": "notes.md", "content": "# Notes\nmilk\n"}))
    fake = AnthropicFake(script().push(reply(*calls), answer("Done.")))
    async with running(home, fake) as pilot:
        app = app_of(pilot)
        await enter_line(pilot, "change them")
        replacing = await next_dialog(pilot)
        assert text_of(replacing, "#question") == (
            "Ever wants to replace app.py (a file that exists)"
        )
        body = text_of(replacing, "#call").splitlines()
        assert body[0] == "The file exists and will be replaced. What changes:"
        assert body[2:] == [
            "--- app.py (now)",
            "+++ app.py (new)",
            "@@ -1,3 +1,3 @@",
            " one",
            "-two",
            "+2",
            " three",
        ]
        await pilot.press("n")
        creating = await next_dialog(pilot, replacing)
        assert text_of(creating, "#question") == "Ever wants to create notes.md"
        assert text_of(creating, "#call") == "A new file, created with 2 lines:\n\n# Notes\nmilk\n"
        await pilot.press("y")
        await wait_until(pilot, lambda: not agent_of(app).busy)
    assert (work / "app.py").read_text() == "one\ntwo\nthree\n"  # denied: as it was
    assert (work / "notes.md").read_text() == "# Notes\nmilk\n"


async def test_an_edit_shows_its_change_numbered_with_three_lines_around_it(home: Path) -> None:
    work = workdir_of(home)
    words = ["one", "two", "three", "four", "five", "six", "seven", "eight", "nine", "ten"]
    (work / "app.py").write_text("".join(f"{word}\n" for word in words))
    edit = ToolCall("edit", {"path": "app.py", "old": "six", "new": "6"})
    fake = AnthropicFake(script().push(reply(edit), answer("Done.")))
    async with running(home, fake) as pilot:
        app = app_of(pilot)
        await enter_line(pilot, "change it")
        dialog = await next_dialog(pilot)
        assert text_of(dialog, "#question") == "Ever wants to edit app.py"
        body = text_of(dialog, "#call").splitlines()
        assert body[0] == "What changes in app.py:"
        assert body[2:] == [
            "@@ -3,7 +3,7 @@",
            "3   three",
            "4   four",
            "5   five",
            "6 - six",
            "6 + 6",
            "7   seven",
            "8   eight",
            "9   nine",
        ]
        await pilot.press("y")
        await wait_until(pilot, lambda: not agent_of(app).busy)
    assert (work / "app.py").read_text().splitlines()[5] == "6"


@pytest.mark.parametrize(
    ("edit", "said"),
    [
        ({"path": "gone.py", "old": "two", "new": "2"}, "gone.py: no such file"),
        ({"path": "app.py", "old": "zwei", "new": "2"}, "`old` does not occur in app.py"),
    ],
)
async def test_an_edit_that_cannot_apply_fails_before_asking(
    home: Path, edit: dict[str, str], said: str
) -> None:
    (workdir_of(home) / "app.py").write_text("one\ntwo\n")
    fake = AnthropicFake(script().push(reply(ToolCall("edit", edit)), answer("Done.")))
    async with running(home, fake) as pilot:
        app = app_of(pilot)
        await enter_line(pilot, "change it")

        def settled() -> bool:
            asked = isinstance(app.screen, PermissionScreen)
            return asked or any(row.finished for row in app.query(ToolRow))

        await wait_until(pilot, settled)
        assert not isinstance(app.screen, PermissionScreen)
        row = app.query_one(ToolRow)
        assert row.is_error and said in row.output_text
        await wait_until(pilot, lambda: not agent_of(app).busy)
    assert (workdir_of(home) / "app.py").read_text() == "one\ntwo\n"


async def test_an_edit_is_not_checked_ahead_where_a_read_would_ask(tmp_path: Path) -> None:
    """Its error would tell the model about a file it may not read unasked: the user is asked."""
    home = tmp_path / "home"
    write_config(home, read="ask")
    edit = ToolCall("edit", {"path": "gone.py", "old": "two", "new": "2"})
    fake = AnthropicFake(script().push(reply(edit), answer("Done.")))
    async with running(home, fake) as pilot:
        await enter_line(pilot, "change it")
        dialog = await next_dialog(pilot)
        assert text_of(dialog, "#call").splitlines() == [
            "What changes in gone.py:",
            "",
            "[no such file]",
        ]
        await pilot.press("n")
        await wait_until(pilot, lambda: not agent_of(app_of(pilot)).busy)
