"""The terminal app's windows of two machines, driven by Pilots, while both machines log: each
shows every message of the shared chat as it is logged, its machine's and the other's; and a
window whose database is down."""

from __future__ import annotations

import socket
from pathlib import Path

import anyio
import pytest

from agent.test_turn_support import write_config
from evertalk.client.connection import Connection, connect
from evertalk.protocol import requests
from evertalk.protocol.replies import Appended
from evertalk.tui.widgets import NoteRow, UserRow
from fakes import AnthropicFake
from pg_server import PgServer
from tui.tui_support import app_of, enter_line, running, script, wait_until

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

COUNT = 80


def send(conn: Connection, n: int) -> list[int]:
    message = requests.OutsideMessage(kind="user", text=f"note {n} of the shared chat", key=f"n{n}")
    return conn.request(requests.Append(messages=[message]), Appended).ids


async def test_both_windows_show_every_message_of_both_machines(
    tmp_path: Path, pg_url: str
) -> None:
    homes = (tmp_path / "home", tmp_path / "office")
    for home in homes:  # each machine's service runs in this process, on a fake of its own
        write_config(home, more=["", "[store]", f'url = "{pg_url}"'])
    async with (
        running(homes[0], AnthropicFake(script()), size=(120, 40)) as one,
        running(homes[1], AnthropicFake(script()), size=(120, 40)) as two,
    ):
        conns = [await anyio.to_thread.run_sync(connect, home, "capture") for home in homes]
        try:
            for n in range(COUNT):
                assert await anyio.to_thread.run_sync(send, conns[n % 2], n) == [n]
            await wait_until(one, lambda: len(shown(one)) >= COUNT, timeout=120)
            await wait_until(two, lambda: len(shown(two)) >= COUNT, timeout=120)
            seen = [(shown(pilot), heads(pilot)) for pilot in (one, two)]
        finally:
            for conn in conns:
                conn.close()
    for at, (rows, named) in enumerate(seen):
        # as each came: the other machine's a moment after it was logged, when folded
        assert len(rows) == COUNT
        here = range(at, COUNT, 2)  # appended through this window's service: one note each
        there = range(1 - at, COUNT, 2)  # the other machine's: whole, as user rows
        mine = {f"user from capture: note {n} of the shared chat" for n in here}
        theirs = {f"note {n} of the shared chat" for n in there}
        assert set(rows) == mine | theirs
        assert set(named) == {f"from {socket.gethostname()}:{homes[1 - at]}:"}


def shown(pilot: object) -> list[str]:
    """The rows of the shared chat's notes in a window: this machine's appends as notes, the
    other machine's messages whole, as user rows."""
    app = app_of(pilot)
    notes = [row.text for row in app.query(NoteRow) if "shared chat" in row.text]
    users = [row.text for row in app.query(UserRow) if "shared chat" in row.text]
    return notes + users


def heads(pilot: object) -> list[str]:
    return [row.text for row in app_of(pilot).query(NoteRow) if row.text.startswith("from ")]


async def test_the_window_keeps_a_message_the_database_cannot_take(
    tmp_path: Path, own_server: PgServer
) -> None:
    home = tmp_path / "home"
    write_config(home, more=["", "[store]", f'url = "{own_server.create_database("window")}"'])
    async with running(home, AnthropicFake(script())) as pilot:
        app = app_of(pilot)
        own_server.shut_down()
        try:
            await enter_line(pilot, "hello over there")

            def refused() -> list[str]:
                return [row.text for row in app.query(NoteRow) if row.text.startswith("not sent")]

            await wait_until(pilot, refused)
            (line,) = refused()
            assert "\n" not in line and "database" in line, line
            assert line.endswith("(it is back in the input)")
            assert app.prompt.text == "hello over there"
        finally:
            own_server.start_again()
