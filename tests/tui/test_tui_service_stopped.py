"""A window whose service was stopped on purpose (`service stop`, `memory repair`) waits for the
user's next action before it starts another, and says so; one whose service went away by
itself connects again at once."""

from __future__ import annotations

import sys
from pathlib import Path

import anyio
import pytest
from tui_support import (
    HOSTS,
    SIZE,
    app_of,
    enter_line,
    log_of,
    running,
    script,
    wait_until,
    workdir_of,
    write_config,
)

from evertalk.client.remote import open_remote
from evertalk.protocol.requests import Stop
from evertalk.tui.app import ChatApp
from evertalk.tui.widgets import NoteRow
from fakes import AnthropicFake, serve
from fakes import chat as answer

pytestmark = pytest.mark.anyio


def notes(app: ChatApp) -> list[str]:
    return [row.text for row in app.query(NoteRow)]


def waits_for_the_user(app: ChatApp) -> bool:
    return app.remote is None and any("starts again with your next" in n for n in notes(app))


async def stop_from_another_client(home: Path) -> None:
    """As `evertalk service stop` asks it."""
    remote = await open_remote(home, "stop", start=False)
    try:
        await remote.post(Stop())
    finally:
        await remote.aclose()


async def test_a_window_waits_after_service_stop_and_starts_it_at_the_next_message(
    home: Path,
) -> None:
    fake = AnthropicFake(script())
    fake.behaviour.push(answer("here again"))  # type: ignore[attr-defined]
    async with running(home, fake) as pilot:
        app = app_of(pilot)
        host = HOSTS[id(app)]
        assert host.starts == 1
        await stop_from_another_client(home)
        await wait_until(pilot, lambda: waits_for_the_user(app), what="the note that it waits")
        assert host.starts == 1  # nothing started the service again meanwhile
        assert "stopped" in app.status_bar.text
        await enter_line(pilot, "are you there?")
        await wait_until(pilot, lambda: ("ever", "here again") in log_of(home), timeout=20)
        assert host.starts == 2
        assert ("user", "are you there?") in log_of(home)


def damage_the_first_day_file(home: Path) -> None:
    """A line of the log made unreadable under the running service, as a disk might."""
    (day,) = sorted((home / "chat" / "main").glob("*.jsonl"))[:1]
    lines = day.read_bytes().splitlines(keepends=True)
    lines[0] = b"\xff damaged\n"
    day.write_bytes(b"".join(lines))


async def test_memory_repair_runs_while_a_window_is_open(tmp_path: Path) -> None:
    """The window's service is a real one (a process of its own), as `memory repair` stops it
    and waits for it to end; a repair with nothing to do stops nothing."""
    home = tmp_path / "home"
    fake = AnthropicFake(script())
    fake.behaviour.push(answer("logged"), answer("repaired and back"))  # type: ignore[attr-defined]
    with serve(fake.app) as url:
        write_config(home, base_url=url)
        app = ChatApp(home, workdir=workdir_of(home))
        async with app.run_test(size=SIZE) as pilot:
            with anyio.fail_after(30):
                await app.ready.wait()
            first = app.remote.pid if app.remote is not None else None
            await enter_line(pilot, "a first message")
            await wait_until(pilot, lambda: ("ever", "logged") in log_of(home), timeout=30)
            healthy = await anyio.run_process(
                [sys.executable, "-m", "evertalk", "--home", str(home), "memory", "repair"],
                check=False,
            )
            assert healthy.returncode == 0 and b"Nothing to repair" in healthy.stdout
            assert app.remote is not None and app.remote.pid == first  # not stopped for nothing
            damage_the_first_day_file(home)
            repair = await anyio.run_process(
                [sys.executable, "-m", "evertalk", "--home", str(home), "memory", "repair"],
                check=False,
            )
            err = repair.stderr.decode()
            assert repair.returncode == 0, err
            assert "open in another process" not in err
            await wait_until(pilot, lambda: waits_for_the_user(app), what="the note that it waits")
            await enter_line(pilot, "still here?")
            await wait_until(
                pilot, lambda: ("ever", "repaired and back") in log_of(home), timeout=30
            )
            assert app.remote is not None and app.remote.pid != first
