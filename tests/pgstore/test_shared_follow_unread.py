"""A window that comes back while the shared chat's database is down: the service never tells it
a position past messages it could not read (the follower rule). It waits for the database, and
the window gets every message it missed, or it is refused and connects again later."""

from __future__ import annotations

import threading
from pathlib import Path

import anyio
import pytest

from evertalk.client.remote import open_remote
from evertalk.pgstore.session import PgSession
from evertalk.protocol.replies import Missed
from evertalk.shared_chat import SharedChat
from fakes import AnthropicFake
from pg_server import PgServer
from service.test_followers import Follower
from tui.tui_support import fake_opener, hosted, script, write_config

pytestmark = pytest.mark.anyio
NOTES = 12


def log_notes(url: str, folder: Path) -> None:
    """Another machine's notes, logged while no service of this home runs."""
    chat = SharedChat.open_shared(PgSession(url, "office"), folder)
    try:
        for n in range(NOTES):
            chat.append("user", f"note {n} from the office")
    finally:
        chat.close()


async def test_a_window_that_comes_back_while_the_database_is_down_misses_nothing(
    tmp_path: Path, own_server: PgServer
) -> None:
    url = own_server.create_database("unread")
    home = tmp_path / "home"
    write_config(home, more=["", "[store]", f'url = "{url}"'])
    await anyio.to_thread.run_sync(log_notes, url, tmp_path / "office")
    async with hosted(home, fake_opener(home, AnthropicFake(script()))) as host:
        await (await host.connect()).aclose()  # the service runs: it has the notes' count
        own_server.kill()  # nothing of them was read yet, and now the database is gone
        restarted = threading.Timer(1.5, own_server.start_again)
        restarted.start()
        try:
            window = Follower(await open_remote(home, "app", start=False, since=0))
            async with anyio.create_task_group() as group:
                group.start_soon(window.remote.run)
                group.start_soon(window.read)
                (missed,) = await window.until(Missed)
                await window.remote.aclose()
        finally:
            await anyio.to_thread.run_sync(restarted.join)
    assert missed.t == NOTES
    assert [r.id for r in missed.records] == list(range(NOTES))  # none left out
    assert [r.text for r in missed.records] == [f"note {n} from the office" for n in range(NOTES)]
