"""The terminal app's entry point: the setup form first when no provider is set up, then the
chat screen connected to the service (`tui/__init__.py` has it starting already), and on exit
one line of what the session cost."""

from __future__ import annotations

import gc
from collections.abc import Sequence
from pathlib import Path

import anyio

from evertalk.client.connection import Starting
from evertalk.client.remote import Remote, open_remote
from evertalk.config import Config
from evertalk.runtime import configuration_problem
from evertalk.terminal_text import escape_controls, fail
from evertalk.tui.app import ChatApp
from evertalk.tui.history import log_tail

SHOWN_WITHIN = 10.0  # seconds


def run_terminal(
    home: Path,
    config: Config,
    notices: Sequence[str] = (),
    starting: Starting | None = None,
    message: str | None = None,
) -> int:
    """Set up the provider if none is, connect to the service (`starting` already, or started
    now), run the app (which sends `message` once connected); the exit status."""
    try:
        return anyio.run(_main, home, config, notices, starting, message)
    except KeyboardInterrupt:
        return 130


async def _main(
    home: Path,
    config: Config,
    notices: Sequence[str],
    starting: Starting | None,
    message: str | None,
) -> int:
    if _unconfigured(home, config):
        from evertalk.tui.setup import SetupApp

        if not await SetupApp(home, config).run_async():
            return fail("nothing was set up; run evertalk again to set up a provider")

    async def connector(*, since: int | None, start: bool, edits: int | None = None) -> Remote:
        nonlocal starting
        started, starting = starting, None
        return await open_remote(
            home, "app", start=start, starting=started, since=since, edits=edits
        )

    # the log's last messages, shown at once: the service may take a second more to answer
    tail = log_tail(home / "chat")
    app = ChatApp(
        home,
        connector=connector,
        notices=notices,
        workdir=config.workdir_path,
        tail=tail,
        first_message=message,
    )
    async with anyio.create_task_group() as group:
        group.start_soon(_collect_once_shown, app)
        await app.run_async()
        group.cancel_scope.cancel()
    if app.failure is not None:
        return fail(app.failure)
    summary = app.summary()
    if summary is not None:  # the screen is the terminal's again: the line stays in it
        print(escape_controls(summary))
    return app.return_code or 0


async def _collect_once_shown(app: ChatApp) -> None:
    """The garbage collector back on (`run_terminal` turned it off) once the window is
    connected and shows the log, or after a while whatever happens; what start-up made is kept
    out of its way."""
    with anyio.move_on_after(SHOWN_WITHIN):
        await app.ready.wait()
    gc.freeze()
    gc.enable()


def _unconfigured(home: Path, config: Config) -> bool:
    return configuration_problem(home, config) is not None
