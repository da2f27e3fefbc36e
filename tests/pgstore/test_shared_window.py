"""The terminal app's window of one machine, driven by a Pilot, while both machines log: it
shows every message of the shared chat as it is logged, this machine's and the other's."""

from __future__ import annotations

import socket
from functools import partial
from pathlib import Path

import anyio
import pytest

from agent.test_turn_support import write_config
from evertalk.client.connection import Connection, connect
from evertalk.protocol import requests
from evertalk.protocol.replies import Appended
from evertalk.tui.widgets import NoteRow, UserRow
from fakes import AnthropicFake, serve
from pg_server import PgServer
from served_home import run
from tui.tui_support import app_of, enter_line, running, script, wait_until

pytestmark = [pytest.mark.anyio, pytest.mark.slow]

COUNT = 200


def send(conn: Connection, n: int) -> list[int]:
    message = requests.OutsideMessage(kind="user", text=f"note {n} of the shared chat", key=f"n{n}")
    return conn.request(requests.Append(messages=[message]), Appended).ids


async def test_a_window_shows_every_message_of_both_machines(tmp_path: Path, pg_url: str) -> None:
    fake = AnthropicFake(script())
    home, office = tmp_path / "home", tmp_path / "office"
    store = ["", "[store]", f'url = "{pg_url}"']
    with serve(fake.app) as url:
        write_config(home, more=store)  # its service runs in this process, on the fake
        write_config(office, base_url=url, more=store)
        try:
            async with running(home, fake, size=(120, 40)) as pilot:
                app = app_of(pilot)
                here = await anyio.to_thread.run_sync(connect, home, "capture")
                there = await anyio.to_thread.run_sync(
                    partial(connect, office, "capture", start=True)
                )
                for n in range(COUNT):
                    ids = await anyio.to_thread.run_sync(send, here if n % 2 == 0 else there, n)
                    assert ids == [n]

                def shown() -> list[str]:
                    """This machine's appends as notes; the other's whole, as user rows."""
                    notes = [row.text for row in app.query(NoteRow) if "shared chat" in row.text]
                    users = [row.text for row in app.query(UserRow) if "shared chat" in row.text]
                    return notes + users

                await wait_until(pilot, lambda: len(shown()) >= COUNT, timeout=60)
                rows = shown()
                heads = [row.text for row in app.query(NoteRow) if row.text.startswith("from ")]
                for conn in (here, there):
                    conn.close()
            # as each came: the other machine's a moment after it was logged, when folded
            assert len(rows) == COUNT
            mine = {f"user from capture: note {n} of the shared chat" for n in range(0, COUNT, 2)}
            theirs = {f"note {n} of the shared chat" for n in range(1, COUNT, 2)}
            assert set(rows) == mine | theirs
            assert set(heads) == {f"from {socket.gethostname()}:{office}:"}
        finally:
            run(office, "service", "stop", timeout=120)


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
