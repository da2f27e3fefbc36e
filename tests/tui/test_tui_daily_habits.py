"""The habits users bring from other agents, in the app: `/edit` brings the last message back to
change and send again; the working folder's AGENTS.md (else CLAUDE.md) reaches the model on
every turn, after the view, and `/instructions` says which file is in force."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from textual.pilot import Pilot
from tui_support import (
    app_of,
    enter_line,
    log_of,
    run_command,
    running,
    script,
    turn_bodies,
    wait_until,
    workdir_of,
)

from evertalk.folder_instructions import MOST_BYTES
from evertalk.tui.app import ChatApp
from evertalk.tui.widgets import PromptInput, ReplyView
from fakes import AnthropicFake
from fakes import chat as answer

pytestmark = pytest.mark.anyio


def replies(app: ChatApp) -> list[str]:
    return [view.source for view in app.query(ReplyView)]


async def exchange(pilot: Pilot[int], text: str, count: int) -> None:
    """Send `text`; wait for the turn's reply (the `count`th) and its end."""
    app = app_of(pilot)
    await enter_line(pilot, text)
    await wait_until(pilot, lambda: len(replies(app)) >= count and not app.busy)


def texts_of(body: dict[str, Any]) -> list[str]:
    """The text blocks of a turn call's first message: the view's, then the opening's."""
    content = body["messages"][0]["content"]
    return [block["text"] for block in content if block.get("type") == "text"]


async def test_edit_puts_the_last_message_back_to_send_again(home: Path) -> None:
    fake = AnthropicFake(script().push(answer("One."), answer("Two.")))
    async with running(home, fake) as pilot:
        app = app_of(pilot)
        prompt = app.query_one(PromptInput)
        assert "nothing to edit" in await run_command(pilot, "/edit")
        await exchange(pilot, "the frist draft", 1)
        await run_command(pilot, "/help")  # a command since: /edit skips it
        await enter_line(pilot, "/edit")
        await wait_until(pilot, lambda: prompt.text == "the frist draft")
        assert prompt.cursor_location == prompt.document.end
        prompt.replace("first", (0, 4), (0, 9))
        await pilot.press("enter")
        await wait_until(pilot, lambda: len(replies(app)) == 2 and not app.busy)
    # the original stays in the log: the log is never edited
    assert log_of(home) == [
        ("user", "the frist draft"),
        ("ever", "One."),
        ("user", "the first draft"),
        ("ever", "Two."),
    ]


async def test_the_folder_instructions_reach_every_turn_after_the_view(home: Path) -> None:
    fake = AnthropicFake(script().push(answer("A."), answer("B."), answer("C.")))
    folder = workdir_of(home)
    async with running(home, fake) as pilot:
        await exchange(pilot, "no instructions yet", 1)
        (folder / "CLAUDE.md").write_text("Use tabs.\n")
        await exchange(pilot, "now with CLAUDE.md", 2)
        (folder / "AGENTS.md").write_text("# Conventions\n\nRun `make check` before a commit.\n")
        await exchange(pilot, "now with AGENTS.md", 3)
    first, second, third = turn_bodies(fake)
    # the system prompt and the tools are byte-identical: the cached prefix is kept
    assert first["system"] == second["system"] == third["system"]
    assert first["tools"] == second["tools"] == third["tools"]
    assert "Use tabs." not in str(first)
    # the file goes after the view, before the turn's header, verbatim
    opening = texts_of(second)[-1]
    assert "</chat>" not in opening and "</chat>" in texts_of(second)[-2]
    where = [opening.index(text) for text in ("Use tabs.", "Now: ", "now with CLAUDE.md")]
    assert where == sorted(where)
    assert str(folder / "CLAUDE.md") in opening
    # AGENTS.md goes first; read afresh at each turn
    opening = texts_of(third)[-1]
    assert "# Conventions\n\nRun `make check` before a commit.\n</folder_instructions>" in opening
    assert "Use tabs." not in opening
    # the view holds none of it, and grows by appending as without it: its cache is kept
    views = ["".join(texts_of(body)[:-1]) for body in (first, second, third)]
    assert not any("Use tabs." in view or "Conventions" in view for view in views)
    assert views[2].startswith(views[1].removesuffix("</chat>"))


async def test_instructions_says_which_file_is_in_force(home: Path) -> None:
    edited: list[Path] = []
    folder = workdir_of(home)
    async with running(home, AnthropicFake(script()), editor=edited.append) as pilot:
        said = await run_command(pilot, "/instructions")
        assert said.startswith(f"No AGENTS.md or CLAUDE.md in {folder}")
        assert str(home / "instructions.md") in said
        (folder / "CLAUDE.md").write_text("Use tabs.\n")
        said = await run_command(pilot, "/instructions")
        assert said.startswith(f"In force in {folder}: {folder / 'CLAUDE.md'} (10 bytes)")
        (folder / "AGENTS.md").write_text("x" * (MOST_BYTES + 5))
        said = await run_command(pilot, "/instructions")
        assert f"{folder / 'AGENTS.md'} ({MOST_BYTES + 5:,} bytes, cut to its first" in said
        assert "CLAUDE.md is not read while AGENTS.md is there" in said
        await run_command(pilot, "/instructions edit")
        assert edited == [home / "instructions.md"]
