"""A client's connection to its home's service: connect, start the service if asked, handshake.

Blocking and standard library only (sockets, subprocess): `evertalk -p` through a running
service must start in a fraction of a second, so nothing here imports anyio, the agent, the
providers or their SDKs.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn

from evertalk import __version__
from evertalk.client.hold import held_by
from evertalk.processes import process_alive as process_alive
from evertalk.protocol import environment, wire
from evertalk.service.paths import log_path, peer_uid, socket_folder_problem, socket_path
from evertalk.service.startup import opening

CANNOT_SERVE = "evertalk: cannot serve: "
"""How the service's last line starts when it could not start (`service_cli.py`)."""

START_SECONDS = 10.0
"""How long a client waits for the service it started to answer."""
OPENING_SECONDS = 600.0
"""… and for a service that says it is opening the chat (a million messages with no view.json
fold their views from the first: seconds to minutes)."""
LOOK_EVERY = 0.25
"""Seconds between two looks at the log for what a starting service does."""
SAY_AFTER = 2.0
"""Seconds of the service's own opening before a client says it waits for it."""

Say = Callable[[str], None]
"""Where a client says what it waits for (standard error for the command lines)."""


class ServiceError(Exception):
    """The service could not be reached, started or used: one line for the user."""


class ServiceGone(ServiceError):
    """The connection ended: the service stopped or died."""


class RequestFailed(ServiceError):
    """The service answered a request with an error: its one line, and its kind."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


class Connection:
    """One connection, after the handshake: frames out with `send`, in with `receive`."""

    def __init__(self, sock: socket.socket, welcome: dict[str, Any]) -> None:
        self.sock = sock
        self.welcome = welcome
        self.reader = wire.FrameReader()
        self.pending: list[dict[str, Any]] = []  # frames read, not yet received
        self._rids = 0  # the requests sent, for each one's own id

    @property
    def pid(self) -> int:
        return int(self.welcome.get("pid", 0))

    def send(self, frame: dict[str, Any]) -> None:
        try:
            self.sock.sendall(wire.encode(frame))
        except OSError:
            raise ServiceGone("the service went away") from None

    def receive(self) -> dict[str, Any]:
        """The next frame; ServiceGone when the service closed the connection."""
        while not self.pending:
            try:
                data = self.sock.recv(1 << 16)
            except OSError:
                data = b""
            if not data:
                raise ServiceGone("the service went away")
            self.pending = self.reader.feed(data)
        return self.pending.pop(0)

    def request(self, frame: dict[str, Any]) -> dict[str, Any]:
        """Send a request and wait for its reply; the events that come meanwhile are passed
        over. RequestFailed for an error reply, ServiceGone when the connection ends first."""
        self._rids += 1
        rid = f"{os.getpid()}-{self._rids}"
        self.send(frame | {"rid": rid})
        while (reply := self.receive()).get("rid") != rid:
            pass
        if reply.get("type") == "error":
            raise RequestFailed(str(reply.get("kind")), str(reply.get("message")))
        return reply

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()

    def __enter__(self) -> Connection:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def connect(
    home: Path,
    client: str,
    *,
    start: bool = False,
    serve_args: tuple[str, ...] = (),
    starting: Starting | None = None,
    say: Say | None = None,
) -> Connection:
    """A connection to the service of `home`; with `start`, one is started if none answers
    (with `serve_args` for `evertalk serve --foreground`), or the one `starting` already is
    awaited (`say` is told of a long wait). ServiceError (one line) when there is none, it
    cannot start, or it refuses this client."""
    deadline = time.monotonic() + START_SECONDS
    while True:
        sock = _socket(home)
        if sock is None and starting is not None:
            sock, starting = starting.wait(say), None
        elif sock is None and start:
            sock = Starting(home, serve_args).wait(say)
        if sock is None:
            raise ServiceError("no evertalk service is running for this home")
        try:
            return _handshake(sock, client)
        except ServiceGone:
            # a service dying as we connected (its listener closed after it took us), or
            # one stopping: the next try finds the socket gone, or the next service
            if time.monotonic() > deadline:
                raise ServiceError("the service closed the connection at the handshake") from None
            time.sleep(0.05)


def running(home: Path) -> bool:
    """Whether a service answers on this home's socket."""
    sock = _socket(home)
    if sock is None:
        return False
    sock.close()
    return True


def _socket(home: Path) -> socket.socket | None:
    """A connected socket, or None when nothing listens (no file, or a stale one). Before a
    byte is sent, the socket's folder and the listener's user are checked: another user who
    made a deep home's folder in the temporary directory first could listen there."""
    path = socket_path(home)
    problem = socket_folder_problem(path)
    if problem is not None:
        raise ServiceError(f"not connecting to {path}: {problem}")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        sock.connect(os.fspath(path))
        uid = peer_uid(sock)
    except (FileNotFoundError, ConnectionRefusedError):
        sock.close()
        return None
    except OSError as error:
        sock.close()
        raise ServiceError(f"cannot reach the service at {path}: {error.strerror}") from None
    if uid is not None and uid != os.getuid():
        sock.close()
        raise ServiceError(
            f"not connecting to {path}: what listens there runs as another user (uid {uid})"
        )
    return sock


class Starting:
    """A service started, detached, logging to `<home>/service.log`: `wait` for it to answer."""

    def __init__(self, home: Path, serve_args: tuple[str, ...] = ()) -> None:
        home = home.resolve()  # the service runs in the home: a relative path would lead elsewhere
        held = held_by(home)  # `memory repair` has the chat's files: no service until it ends
        if held is not None:
            raise ServiceError(held)
        home.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.home = home
        self.log = log_path(home)
        descriptor = os.open(self.log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        self.start_at = self.log.stat().st_size
        command = [sys.executable, "-m", "evertalk", "--home", str(home), "serve", "--foreground"]
        command += serve_args
        try:
            self.process = subprocess.Popen(
                command,
                stdin=subprocess.DEVNULL,
                stdout=descriptor,
                stderr=descriptor,
                start_new_session=True,  # not ended by the terminal's Ctrl+C or hangup
                cwd=home,
            )
        finally:
            os.close(descriptor)

    def wait(self, say: Say | None = None) -> socket.socket:
        """A socket connected to it, once it answers; ServiceError (its log's last lines)
        when it does not within START_SECONDS. While a service opens the chat (this one, or
        another client's that got the lock first) the wait goes on, up to OPENING_SECONDS, and
        `say` is told so once."""
        began = time.monotonic()
        deadline, looked, said = began + START_SECONDS, 0.0, False
        while time.monotonic() < deadline:
            sock = _socket(self.home)
            if sock is not None:
                return sock
            now = time.monotonic()
            if now - looked >= LOOK_EVERY:
                looked = now
                pid = opening(self.home)
                if pid is not None:  # a large chat takes a while to open: not a failure
                    deadline = max(deadline, began + OPENING_SECONDS)
                    said = said or self._say_opening(pid, now - began, say)
                elif self.process.poll() is not None:
                    # another client's service may be the one that got the chat: give it a moment
                    deadline = min(deadline, now + 1.0)
            time.sleep(0.02)
        return self._failed()

    def _say_opening(self, pid: int, waited: float, say: Say | None) -> bool:
        """Say that a service opens the chat: at once for another client's, after a moment
        for this one's (a small chat opens before a line would be worth it). Whether said."""
        if say is None or (pid == self.process.pid and waited < SAY_AFTER):
            return False
        say(f"the service (pid {pid}) is opening the chat; a large one takes a while")
        return True

    def _failed(self) -> NoReturn:
        tail = _log_tail(self.log, self.start_at)
        if tail and tail[-1].startswith(CANNOT_SERVE):  # its own one-line error: the user's too
            raise ServiceError(tail[-1].removeprefix(CANNOT_SERVE))
        raise ServiceError(
            f"the service did not start: {' / '.join(tail) or f'nothing in {self.log}'}"
        )


LOCK_SECONDS = 5.0
"""How long a client waits for a chat held by a process that serves no socket (a service
stopping, whose summaries in flight land first) before it says who holds it."""


def start_service(home: Path) -> Starting | None:
    """Start the service of `home` unless one answers; None when one does. The caller goes on
    with its own start meanwhile and connects with `connect(..., starting=…)`. A chat that
    another program holds (`memory compact`, an older evertalk) is a ServiceError naming it."""
    from evertalk.store.lock import read_owner

    deadline = time.monotonic() + LOCK_SECONDS
    while True:
        sock = _socket(home)
        if sock is not None:
            sock.close()
            return None
        owner = read_owner(home / "chat")
        if owner is None or held_by(home) is not None:
            return Starting(home)  # which says what holds the service, if anything does
        if time.monotonic() > deadline:
            raise ServiceError(
                f"the chat at {home / 'chat'} is open in another process (pid {owner}). "
                "Only one program at a time can own a chat: close the other one first"
            )
        time.sleep(0.05)


def _log_tail(log: Path, start_at: int) -> list[str]:
    """The last lines the service wrote since `start_at`."""
    try:
        with log.open("rb") as file:
            file.seek(start_at)
            lines = file.read().decode("utf-8", "replace").splitlines()
    except OSError:
        lines = []
    return [line.strip() for line in lines if line.strip()][-3:]


def _handshake(sock: socket.socket, client: str) -> Connection:
    hello = {
        "type": "hello",
        "protocol": wire.PROTOCOL,
        "version": __version__,
        "client": client,
        "pid": os.getpid(),
        "env": environment.digest(),  # which provider variables it sees, never their values
    }
    connection = Connection(sock, {})
    connection.send(hello)
    try:
        answer = connection.receive()
    except ServiceGone:
        connection.close()
        raise
    if answer.get("type") == "error" and answer.get("kind") == "restart":
        connection.close()
        raise ServiceGone(str(answer.get("message")))  # it stops: the next try starts anew
    if answer.get("type") != "welcome":
        connection.close()
        raise ServiceError(str(answer.get("message") or "the service refused this client"))
    connection.welcome = answer
    return connection


STOP_SECONDS = 660.0
"""How long a stop waits for the service to go: its summaries in flight may take the call
deadline (600 s by default)."""


def stop_service(home: Path, client: str = "stop") -> int | None:
    """Ask the service of `home` to stop and wait until it has; its pid, or None when none
    was running."""
    try:
        connection = connect(home, client)
    except ServiceError:
        return None
    pid = connection.pid
    with connection:
        try:
            connection.send({"type": "stop"})
            while True:
                connection.receive()
        except ServiceGone:
            pass
    deadline = time.monotonic() + STOP_SECONDS
    while process_alive(pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    return pid


def take_over(home: Path, what: str) -> None:
    """Before `what` opens the chat in its own process: a running service is asked to stop,
    and this is said on standard error (the service starts again with the next `-p`)."""
    if not running(home):
        return
    print(f"evertalk: stopping the service to open the chat in {what}", file=sys.stderr)
    stop_service(home, what)
