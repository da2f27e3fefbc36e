"""config.toml or instructions.md edited while the service runs: the new settings apply between
two turns, and every window is told.

The files' stamps are looked at every few seconds (a stat each). Once they differ from what the
service's agent was opened on, and no turn or subagent works, the agent is reopened on them
(`Service.reopen`, as `/setup` does), and each window gets `reopened`. While a turn works the
windows are told that the change waits for it; a file that cannot be used is said once, and
the service goes on with the settings it has, rather than stopping on a half-saved edit.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import anyio

from evertalk.config import ConfigError, load_config
from evertalk.protocol import events
from evertalk.protocol.paths import log

if TYPE_CHECKING:
    from evertalk.agent.session import Agent

SETTINGS_EVERY = 2.0
"""Seconds between two looks at the settings' files."""
CHANGED = "config.toml or instructions.md changed"

Stamp = tuple[tuple[int, int] | None, ...]


class Watched(Protocol):
    """The service as the watch sees it (`server.Service`)."""

    home: Path
    agent: Agent | None
    settings_read: Stamp
    stopping: anyio.Event

    def busy(self) -> bool:
        """A turn runs, a message waits or a subagent works."""

    def reopen(self) -> None:
        """Close the agent and open one on the settings saved now."""

    def broadcast(self, event: object) -> None:
        """An event to every client."""


def settings_stamp(home: Path) -> Stamp:
    """What says whether the settings a process read at its start are still the files' own:
    the modification time and size of config.toml and of instructions.md."""
    stamps: list[tuple[int, int] | None] = []
    for name in ("config.toml", "instructions.md"):
        try:
            found = (home / name).stat()
        except OSError:
            stamps.append(None)
        else:
            stamps.append((found.st_mtime_ns, found.st_size))
    return tuple(stamps)


async def watch_settings(service: Watched, every: float = SETTINGS_EVERY) -> None:
    """Apply edited settings between turns, for as long as the service runs."""
    said: object = None  # the stamp last spoken of: each change is said once
    while not service.stopping.is_set():
        await anyio.sleep(every)
        stamp = settings_stamp(service.home)
        if stamp == service.settings_read or service.agent is None:
            continue
        problem = _problem(service)
        if problem is None and not service.busy():
            log(f"{CHANGED}: reopening the chat on them")
            service.settings_read = stamp  # asked once; the new agent reads them again
            service.reopen()
            continue
        if said != stamp:
            said = stamp
            why = problem or "applied once the turn running now ends"
            service.broadcast(events.MemoryWarning(f"service: {CHANGED}: {why}"))


def _problem(service: Watched) -> str | None:
    """Why the files cannot be used now, said so that the user can fix them."""
    try:
        load_config(service.home, warn=_quiet)
    except ConfigError as error:
        return f"{error}; the service goes on with the settings it has"
    return None


def _quiet(line: str) -> None:
    """What loading the file corrected is said again when the agent opens on it."""
    del line
