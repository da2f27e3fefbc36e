"""A window knows its own message in the `sent` event by the key it sent it under, not by its
text: a message whose key (a configured secret) the service redacted is still this window's, its
image names show, and it shows once, with the secret replaced, held then delivered."""

from __future__ import annotations

from pathlib import Path

import pytest
from tui_support import (
    API_KEY,
    agent_of,
    app_of,
    enter_line,
    log_of,
    run_command,
    running,
    script,
    wait_until,
    write_config,
)

from evertalk.protocol.events import MessageSent
from evertalk.tui.app import ChatApp
from evertalk.tui.turn_rows import Sending
from evertalk.tui.widgets import NoteRow, ReplyView, UserRow
from fakes import AnthropicFake, ToolCall, constant, reply, slow
from fakes import chat as answer

pytestmark = pytest.mark.anyio

TYPED = f"my key is {API_KEY}, keep it"
LOGGED = "my key is [redacted], keep it"


def users(app: ChatApp) -> list[str]:
    return [row.text for row in app.query(UserRow)]


def notes(app: ChatApp) -> list[str]:
    return [row.text for row in app.query(NoteRow)]


def replies(app: ChatApp) -> list[str]:
    return [view.source for view in app.query(ReplyView)]


async def test_a_redacted_message_is_known_as_the_windows_own(home: Path, tmp_path: Path) -> None:
    picture = tmp_path / "shot.png"
    picture.write_bytes(b"\x89PNG\r\n\x1a\n" + b"\x02" * 30)
    fake = AnthropicFake(script().push(answer("Noted.")))
    async with running(home, fake) as pilot:
        app = app_of(pilot)
        assert "attached shot.png" in await run_command(pilot, f"/image {picture}")
        await enter_line(pilot, TYPED)
        await wait_until(pilot, lambda: not agent_of(app).busy and replies(app) == ["Noted."])
        await wait_until(pilot, lambda: users(app) == [LOGGED])
        assert "with shot.png" in notes(app)  # the names only this window knows
        assert app.rows.sending == []
    assert ("user", LOGGED) in log_of(home)


async def test_a_redacted_message_taken_between_two_steps_shows_once(tmp_path: Path) -> None:
    home = tmp_path / "home"
    write_config(home, shell="allow")
    fake = AnthropicFake(
        script().push(
            slow(2, constant(reply("Checking.", ToolCall("shell", {"command": "echo checked"})))),
            answer("Done."),
        )
    )
    async with running(home, fake) as pilot:
        app = app_of(pilot)
        await enter_line(pilot, "check the backups")
        await wait_until(pilot, lambda: agent_of(app).busy)
        await enter_line(pilot, TYPED)  # before the tool call: held, then taken by the turn
        await wait_until(pilot, lambda: users(app) == ["check the backups", LOGGED])
        await wait_until(pilot, lambda: not agent_of(app).busy and replies(app)[-1:] == ["Done."])
        assert users(app) == ["check the backups", LOGGED]  # the row Ever took, not a second
        assert not any(row.has_class("held") for row in app.query(UserRow))
        assert app.rows.sending == []
    assert ("user", LOGGED) in log_of(home)


def test_a_sent_event_is_matched_by_key_and_without_one_by_text() -> None:
    sending = Sending(TYPED, "", key="k1")
    assert sending.echoed(MessageSent(LOGGED, "app 1", held=False, key="k1"))
    assert not sending.echoed(MessageSent(TYPED, "app 1", held=False, key="k2"))
    assert sending.echoed(MessageSent(TYPED, "app 1", held=False))  # a service without keys
    assert not sending.echoed(MessageSent(LOGGED, "app 1", held=False))
