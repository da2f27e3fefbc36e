"""`evertalk serve` and `evertalk service status|stop`.

`serve --foreground` runs the service in this process (for systemd or launchd); `serve` alone
starts it detached, as a client would, and says where it runs. The idle time before it exits
is `--idle SECONDS`, else the variable EVERTALK_SERVICE_IDLE, else 10 minutes.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

from evertalk.client.connection import (
    ServiceError,
    connect,
    running,
    stop_service,
)
from evertalk.protocol.paths import log, log_path, socket_path
from evertalk.terminal_text import fail

LOCK_WAIT = 5.0
"""Seconds a starting service waits for the chat's lock: a service that was asked to stop holds
it while its last summaries land."""
STOP_WAIT = 660.0
"""Seconds `service stop` waits for the service to go (its summaries in flight may take the
call deadline)."""


def run_service_command(args: argparse.Namespace, home: Path) -> int:
    try:
        if args.command == "serve":
            return _serve(home, args.foreground, args.idle)
        if args.action == "status":
            return _status(home, args.json)
        if args.action == "stop":
            return _stop(home)
    except ServiceError as error:
        return fail(str(error))
    return fail("service: say what to do: status or stop", 2)


def _serve(home: Path, foreground: bool, idle: float | None) -> int:
    seconds = idle if idle is not None else _idle_from_environment()
    if seconds is None:
        return fail("EVERTALK_SERVICE_IDLE: give the idle time in seconds, e.g. 600", 2)
    if not foreground:
        arguments = ("--idle", repr(seconds)) if idle is not None else ()
        with connect(home, "serve", start=True, serve_args=arguments, say=say) as connection:
            pid = connection.pid
        print(f"evertalk service running (pid {pid}) on {socket_path(home)}; log: {log_path(home)}")
        return 0
    return _run_foreground(home, seconds)


def say(line: str) -> None:
    """What a client waits for, on standard error (standard output stays its answer)."""
    print(f"evertalk: {line}", file=sys.stderr, flush=True)


def _idle_from_environment() -> float | None:
    """EVERTALK_SERVICE_IDLE in seconds (`inf`: never idle out), default 600; None if it is
    not a number of seconds."""
    text = os.environ.get("EVERTALK_SERVICE_IDLE", "600")
    try:
        seconds = float(text)
    except ValueError:
        return None
    return seconds if seconds >= 0 else None


def _run_foreground(home: Path, idle: float) -> int:
    import anyio

    from evertalk.agent.session import NotConfigured
    from evertalk.config import ConfigError
    from evertalk.providers.base import ProviderError
    from evertalk.service.server import serve
    from evertalk.service_opening import STARTING
    from evertalk.store.errors import ChatLocked, StoreError
    from evertalk.store.lock import read_owner

    deadline, said = time.monotonic() + LOCK_WAIT, False
    while True:
        if not said and read_owner(home / "chat") is None:
            # before the lock: a client that finds it held by this process waits while it
            # opens the chat (a chat held by another is this command's one-line error)
            log(f"{STARTING} at {home / 'chat'}")
            said = True
        try:
            anyio.run(serve, home, idle)
            return 0
        except ChatLocked as error:
            if time.monotonic() < deadline:
                time.sleep(0.2)
                continue
            return fail(f"cannot serve: {error}")
        except (ConfigError, NotConfigured, StoreError, ProviderError, OSError) as error:
            return fail(f"cannot serve: {error}")
        except KeyboardInterrupt:
            return 130


def _status(home: Path, as_json: bool) -> int:
    from msgspec import UNSET
    from msgspec.structs import replace

    from evertalk.protocol.frames import to_dict
    from evertalk.protocol.replies import Status
    from evertalk.protocol.requests import GetStatus
    from evertalk.protocol.summaries_text import compactor_part

    if not running(home):
        if as_json:
            print(json.dumps({"running": False}))
        else:
            print(f"no evertalk service is running for {home}")
        return 0
    with connect(home, "status") as connection:
        status = connection.request(GetStatus(), Status)
    if as_json:  # the frame as the service sends it to a request with no id
        frame = to_dict(replace(status, rid=UNSET))
        print(json.dumps({"running": True, **frame}, ensure_ascii=False))
        return 0
    agent = status.agent
    turn = "a turn runs" if agent.busy else "no turn runs"
    others = status.clients - 1  # this command is a client too
    print(
        f"evertalk service (pid {status.pid}, version {status.version}) on "
        f"{socket_path(home)}: {others} other client{'s' if others != 1 else ''}; {turn}; "
        f"{compactor_part(agent)}; log: {log_path(home)}"
    )
    if agent.chat_error:
        print(
            f"the chat takes no changes until it is reopened: {agent.chat_error}; the next "
            "message reopens it once the disk takes writes again"
        )
    for line in agent.mcp_problems:
        print(f"MCP server {line}")
    return 0


def _stop(home: Path) -> int:
    pid = stop_service(home, say=lambda line: print(f"evertalk: {line}", file=sys.stderr))
    if pid is None:
        print(f"no evertalk service is running for {home}")
    else:
        print(f"evertalk service (pid {pid}) stopped")
    return 0
