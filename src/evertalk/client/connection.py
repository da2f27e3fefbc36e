"""A client's connection to its home's service: connect, start the service if asked, handshake.

Blocking and standard library only (sockets, subprocess): `evertalk -p` through a running
service must start in a fraction of a second, so nothing here imports anyio, the agent, the
providers or their SDKs; what starts a service is loaded only to start one.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import msgspec
from msgspec import UNSET

from evertalk import __version__
from evertalk.processes import process_alive as process_alive
from evertalk.protocol import environment, frames, wire
from evertalk.protocol.events import MemoryWarning
from evertalk.protocol.frames import ServiceFrame
from evertalk.protocol.paths import (
    is_private_folder,
    log_path,
    peer_uid,
    socket_folder_problem,
    socket_path,
)
from evertalk.protocol.replies import Error, Welcome
from evertalk.protocol.requests import Hello, Request, Stop

CANNOT_SERVE = "evertalk: cannot serve: "
"""How the service's last line starts when it could not start (`service_cli.py`)."""

START_SECONDS = 10.0
"""How long a client waits for the service it started to answer."""
OPENING_SECONDS = 600.0
"""… and for a service that says it is opening the chat (a million messages with no view.json
fold their views from the first: seconds to minutes)."""
LOOK_EVERY = 0.25
"""Seconds between two looks at the log for what a starting service does."""
SAY_AFTER = 1.0
"""Seconds a client waits for a service opening the chat (its own or another client's) before
it says so: a small chat opens well within it, and then nothing is said."""

Say = Callable[[str], None]
"""Where a client says what it waits for (standard error for the command lines)."""


class ServiceError(Exception):
    """The service could not be reached, started or used: one line for the user."""


class ServiceGone(ServiceError):
    """The connection ended: the service stopped or died."""


class BadFrame(ServiceError):
    """The service sent a line that is no frame of this protocol, or a known frame with a
    field missing or wrong: the FrameError's one line. `problem` is the FrameError's
    (`not_a_frame`, or `bad_fields`; also `not_a_frame` for a line over the limit)."""

    def __init__(self, line: str, problem: frames.Problem, rid: Any = UNSET) -> None:
        super().__init__(f"the service sent a broken frame: {line}")
        self.problem: frames.Problem = problem
        self.rid = rid  # the line's, when it had one: the request it answers fails with it


class RequestFailed(ServiceError):
    """The service answered a request with an error: its one line, and its kind."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


R = TypeVar("R", bound=msgspec.Struct)


def read_frame(line: bytes) -> ServiceFrame | None:
    """The frame on one line; None for a frame of a type this client does not know, which is
    skipped (a newer service may send frames an older client has no use for). Every client
    decides that here. BadFrame for a line that is no frame, or a known one that is wrong."""
    try:
        return frames.decode_frame(line)
    except frames.FrameError as error:
        if error.problem == "unknown_type":
            return None
        raise BadFrame(str(error), error.problem, error.rid) from None


def split_lines(reader: wire.FrameReader, data: bytes) -> list[bytes]:
    """The lines `data` completes; BadFrame for one over the limit (the connection is lost
    then: where the next frame starts is unknown)."""
    try:
        return reader.lines(data)
    except wire.ProtocolError as error:
        raise BadFrame(str(error), "not_a_frame") from None


def rid_of(frame: ServiceFrame) -> Any:
    """The request id a frame carries; UNSET for an event or a frame that answers none."""
    return getattr(frame, "rid", UNSET)


def frame_name(frame: object) -> str:
    """The wire name of a typed frame (its tag), else its class's name."""
    config = getattr(frame, "__struct_config__", None)
    tag = getattr(config, "tag", None)
    return tag if isinstance(tag, str) else type(frame).__name__


def reply_as(reply: ServiceFrame, request: Request, kind: type[R]) -> R:
    """`reply`, the reply to `request`, as the `kind` the request has. RequestFailed for an
    error; BadFrame for a reply of another type."""
    if isinstance(reply, Error):
        raise RequestFailed(reply.kind, reply.message)
    if not isinstance(reply, kind):
        said = f"{frame_name(reply)!r} to {frame_name(request)!r}"
        raise BadFrame(f"a reply of {said}", "bad_fields", rid_of(reply))
    return reply


class Connection:
    """One connection, after the handshake: frames out with `send`, in with `receive`."""

    def __init__(self, sock: socket.socket, welcome: Welcome | None = None) -> None:
        self.sock = sock
        self._welcome = welcome  # None until the handshake is over
        self.reader = wire.FrameReader()
        self.pending: list[bytes] = []  # lines read, not yet received
        self._rids = 0  # the requests sent, for each one's own id

    @property
    def welcome(self) -> Welcome:
        if self._welcome is None:
            raise ServiceError("the service has not welcomed this client")
        return self._welcome

    @welcome.setter
    def welcome(self, welcome: Welcome) -> None:
        self._welcome = welcome

    @property
    def pid(self) -> int:
        return self.welcome.pid

    def send(self, frame: msgspec.Struct) -> None:
        try:
            self.sock.sendall(frames.encode_frame(frame))
        except OSError:
            raise ServiceGone("the service went away") from None

    def receive(self) -> ServiceFrame:
        """The next frame (one of a type this client does not know is skipped); ServiceGone
        when the service closed the connection, BadFrame for a line that is no frame."""
        while True:
            while not self.pending:
                try:
                    data = self.sock.recv(1 << 16)
                except OSError:
                    data = b""
                if not data:
                    raise ServiceGone("the service went away")
                self.pending = split_lines(self.reader, data)
            frame = read_frame(self.pending.pop(0))
            if frame is not None:
                return frame

    def request(self, request: Request, kind: type[R]) -> R:
        """Send a request and wait for its reply, of the type `kind`; the frames that come
        meanwhile are passed over. RequestFailed for an error reply, BadFrame for another
        reply, ServiceGone when the connection ends first."""
        self._rids += 1
        rid = f"{os.getpid()}-{self._rids}"
        self.send(msgspec.structs.replace(request, rid=rid))
        while rid_of(reply := self.receive()) != rid:
            pass
        return reply_as(reply, request, kind)

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
    since: int | None = None,
    edits: int | None = None,
) -> Connection:
    """A connection to the service of `home`; with `start`, one is started if none answers
    (with `serve_args` for `evertalk serve --foreground`), or the one `starting` already is
    awaited (`say` is told of a long wait). `since`: the client follows the log from there
    (the hello's `since`), having applied `edits` in-place changes (`changed` frames).
    ServiceError (one line) when there is none, it cannot start, or it refuses this client."""
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
            return _handshake(sock, client, since, edits)
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
    made a deep home's folder in the temporary directory first could listen there. No service
    of ours listens in such a folder (it makes one of its own, which the home records): a
    deep home's is taken as one where none listens."""
    path = socket_path(home)
    problem = socket_folder_problem(path)
    if problem is not None and is_private_folder(path):
        return None
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
        why = error.strerror or str(error)  # a path too long for a socket has no errno
        raise ServiceError(f"cannot reach the service at {path}: {why}") from None
    if uid is not None and uid != os.getuid():
        sock.close()
        raise ServiceError(
            f"not connecting to {path}: what listens there runs as another user (uid {uid})"
        )
    return sock


class Starting:
    """A service started, detached, logging to `<home>/service.log`: `wait` for it to answer."""

    def __init__(self, home: Path, serve_args: tuple[str, ...] = ()) -> None:
        import subprocess

        from evertalk.secret_env import for_own_processes
        from evertalk.service_hold import held_by

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
                env=for_own_processes(),  # the keys this client sealed away (`secret_env`)
            )
        finally:
            os.close(descriptor)

    def wait(self, say: Say | None = None) -> socket.socket:
        """A socket connected to it, once it answers; ServiceError (its log's last lines)
        when it does not within START_SECONDS. While a service opens the chat (this one, or
        another client's that got the lock first) the wait goes on, up to OPENING_SECONDS, and
        `say` is told so once."""
        from evertalk.service_opening import opening

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
                    said = said or say_opening(pid, now - began, say)
                elif self.process.poll() is not None:
                    # another client's service may be the one that got the chat: give it a moment
                    deadline = min(deadline, now + 1.0)
            time.sleep(0.02)
        return self._failed()

    def _failed(self) -> NoReturn:
        tail = _log_tail(self.log, self.start_at)
        if tail and tail[-1].startswith(CANNOT_SERVE):  # its own one-line error: the user's too
            raise ServiceError(tail[-1].removeprefix(CANNOT_SERVE))
        raise ServiceError(
            f"the service did not start: {' / '.join(tail) or f'nothing in {self.log}'}"
        )


def say_opening(pid: int, waited: float, say: Say | None) -> bool:
    """Say that a service opens the chat, once a client has waited SAY_AFTER for it (a small
    chat opens before a line would be worth it, even on a cold start). Whether said."""
    if say is None or waited < SAY_AFTER:
        return False
    say(f"the service (pid {pid}) is opening the chat; a large one takes a while")
    return True


LOCK_SECONDS = 5.0
"""How long a client waits for a chat held by a process that serves no socket (a service
stopping, whose summaries in flight land first) before it says who holds it."""


def start_service(home: Path) -> Starting | None:
    """Start the service of `home` unless one answers; None when one does. The caller goes on
    with its own start meanwhile and connects with `connect(..., starting=…)`. A chat that
    another program holds (`memory compact`, an older evertalk) is a ServiceError naming it."""
    from evertalk.service_hold import held_by
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


def _handshake(
    sock: socket.socket, client: str, since: int | None = None, edits: int | None = None
) -> Connection:
    hello = Hello(
        protocol=wire.PROTOCOL,
        version=__version__,
        client=client,
        pid=os.getpid(),
        env=environment.digest(),  # which provider variables it sees, never their values
        since=UNSET if since is None else since,
        edits=UNSET if since is None or edits is None else edits,
    )
    connection = Connection(sock)
    try:
        connection.send(hello)
        answer = connection.receive()
    except ServiceError:
        connection.close()
        raise
    if isinstance(answer, Error) and answer.kind == "restart":
        connection.close()
        raise ServiceGone(answer.message)  # it stops: the next try starts anew
    if not isinstance(answer, Welcome):
        connection.close()
        refused = answer.message if isinstance(answer, Error) else ""
        raise ServiceError(refused or "the service refused this client")
    connection.welcome = answer
    return connection


STOP_SECONDS = 660.0
"""How long a stop waits for the service to go: its summaries in flight may take the call
deadline (600 s by default)."""


def stop_service(home: Path, client: str = "stop", say: Say | None = None) -> int | None:
    """Ask the service of `home` to stop and wait until it has; its pid, or None when none
    was running. `say` is told what the service says it waits for."""
    try:
        connection = connect(home, client)
    except ServiceError:
        return None
    pid = connection.pid
    with connection:
        try:
            connection.send(Stop())
            while True:
                frame = connection.receive()
                if say is not None and isinstance(frame, MemoryWarning):
                    say(frame.text)
        except ServiceError:  # gone, as asked (or past reading: its pid is awaited all the same)
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
