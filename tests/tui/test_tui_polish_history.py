"""Scrolling back through a chat from an earlier session (issue 15, item 9): the app opens on the
last messages, and each scroll to the top of the log fetches the page of messages before the
oldest shown, keeping what was on the screen in its place, until the chat's first message."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from tui_support import app_of, running, script, wait_until, write_config

from evertalk.chat import Chat
from evertalk.client.remote import Message
from evertalk.tui.app import ChatApp
from evertalk.tui.history import earlier_records, opening_at
from evertalk.tui.widgets import NoteRow, ReplyView, ToolRow, UserRow
from fakes import AnthropicFake

pytestmark = pytest.mark.anyio

TURNS = 40  # of five messages each: the pages of 40 start anywhere in a turn


def long_chat(home: Path) -> None:
    """A note, then turns of a question, a reply, a call and its result, and an answer (the
    first turn's call long enough to take two messages of the log)."""
    with Chat.open(home / "chat") as chat:
        chat.append("note", "imported from elsewhere")
        for turn in range(TURNS):
            chat.append("user", f"question {turn}")
            chat.append("ever", f"Looking ({turn}).", key=f"t{turn}-m0")
            content = "word " * (7_000 if turn == 0 else 2)
            call = {"path": f"notes-{turn}.txt", "content": content}
            chat.append("tool", "write " + json.dumps(call), key=f"t{turn}-m1")
            chat.append("echo", f"write: wrote notes-{turn}.txt", key=f"t{turn}-m2")
            chat.append("ever", f"Answer {turn}.\n\n" + "More words to fill the screen. " * 40)


def questions(app: ChatApp) -> list[str]:
    return [row.text for row in app.query(UserRow)]


async def test_scrolling_up_loads_the_older_messages_until_the_start(tmp_path: Path) -> None:
    home = tmp_path / "home"
    write_config(home)
    long_chat(home)
    total = 1 + 5 * TURNS + 1  # the long call takes two messages
    async with running(home, AnthropicFake(script())) as pilot:
        app = app_of(pilot)
        log = app.chat_log
        intro = app.query(NoteRow).first()
        assert intro.text.startswith(f"{total} messages in this chat; the last 10 follow.")
        assert "Scroll up for earlier ones" in intro.text
        assert questions(app) == [f"question {TURNS - 2}", f"question {TURNS - 1}"]
        await wait_until(pilot, lambda: log.max_scroll_y > 0)  # the last turn fills the screen

        # to the top, as the scrollbar takes it there: a page of older messages comes above,
        # and the row that was at the top stays where it was seen
        for _ in range(3):
            count = len(questions(app))
            below = list(log.children)[1]  # the oldest row shown, under the intro
            seen = below.virtual_region.y  # where the top of the log shows it
            said = intro.text
            log.scroll_home(animate=False)
            await wait_until(pilot, lambda said=said: intro.text != said)  # the page is in
            await wait_until(pilot, lambda: log.scroll_y > 0)  # and the log moved down to it
            await pilot.pause()
            assert below.virtual_region.y - log.scroll_y == seen
            assert len(questions(app)) >= count + 7
            oldest = int(questions(app)[0].split()[1])
            assert questions(app) == [f"question {turn}" for turn in range(oldest, TURNS)]
            assert f"; the last {total - 5 * oldest - 2} follow." in intro.text

        # Page Up from the input, again and again: the whole chat, in order, each call paired
        for _ in range(400):
            if len(questions(app)) == TURNS:
                break
            await pilot.press("pageup")
        await wait_until(pilot, lambda: len(questions(app)) == TURNS)
        await wait_until(pilot, lambda: intro.text.startswith(f"{total} messages in this chat."))
        assert questions(app) == [f"question {turn}" for turn in range(TURNS)]
        tools = list(app.query(ToolRow))
        assert [tool.heading for tool in tools] == [
            f"✓ write  notes-{turn}.txt" for turn in range(TURNS)
        ]
        assert all(tool.output_text == f"wrote notes-{n}.txt" for n, tool in enumerate(tools))
        assert len(app.query(ReplyView)) == 2 * TURNS
        rows = list(log.children)
        assert rows[0] is intro
        assert isinstance(rows[1], NoteRow) and rows[1].text == "note: imported from elsewhere"
        assert isinstance(rows[2], UserRow) and rows[2].text == "question 0"


def test_each_part_shown_starts_where_a_row_does() -> None:
    def log(kinds: str, keys: dict[int, str] | None = None) -> list[Message]:
        names = {"u": "user", "e": "ever", "t": "tool", "o": "echo", "n": "note"}
        keys = keys or {}
        return [Message(i, names[k], k, keys.get(i)) for i, k in enumerate(kinds)]

    # a part that begins with a call's result, or a long message's later pages, begins after
    assert opening_at(log("oueto"), whole=False) == 1
    assert opening_at(log("ttou", {0: "k.1", 1: "k.2"}), whole=False) == 3
    assert opening_at(log("oueto"), whole=True) == 0  # the chat's first message: all of it
    assert opening_at(log("tto", {0: "k.1", 1: "k.2"}), whole=False) == 0  # none opens
    # the first rows at opening, when they are the last 8 alone, start at a call, not its result
    records = log("u" + "to" * 25)[-41:]
    assert earlier_records(records[1:])[0].kind == "tool"
    shifted = log("u" + "to" * 25 + "t")[-40:]
    assert earlier_records(shifted)[0].kind == "tool"
