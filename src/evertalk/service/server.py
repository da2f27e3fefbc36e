"""The service: one process per home owns the chat and serves its clients on a Unix socket.

Order at start: the agent opens the chat (its lock: a second service fails there, as any second
owner does), then the socket is bound. Any socket file found then is stale, since whoever made
it no longer holds the lock, and it is removed first. The socket is the owner's alone (0600 in
the 0700 home), and on Linux each peer's uid is checked as well (SO_PEERCRED).

Each connection: a `hello` with the client's protocol and version, answered by `welcome` or by
an `error` that says how to restart the service; from then on the client gets every event of
the agent as a frame (`protocol/wire.py`), and sends requests: `send` (a message, with an
idempotency key and the client's working directory), `retry`, `cancel`, `status`, `answer` (to
a permission request), `stop`. One task writes to each connection, from its outbox.

A permission request goes to the client that sent the latest message, or, when that one has
gone, to any other; with none connected it waits ASK_SECONDS for one, then is denied.

The service stays while a client is connected, a turn runs, a subagent works or the compactor
has work, and exits after `idle_seconds` without any of them. SIGTERM or a `stop` request end it
at once, after the compaction calls in flight land (each is paid for).
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import os
import signal
import socket
import struct
import sys
import time
import uuid
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import anyio
from anyio.abc import SocketAttribute, SocketStream

from evertalk import __version__
from evertalk.agent.permissions import Decision
from evertalk.agent.retry import NothingToRetry
from evertalk.agent.session import Agent
from evertalk.protocol import events, wire
from evertalk.providers.base import Image
from evertalk.service.paths import socket_path

IDLE_SECONDS = 600.0
ASK_SECONDS = 120.0
HELLO_SECONDS = 10.0
DECISIONS = frozenset({"once", "always", "deny"})
WATCHERS = frozenset({"status", "stop", "serve", "test"})
"""Clients that only look at the service or end it: a change of settings does not restart it
for them."""


def log(line: str) -> None:
    """One line of the service's log (standard error: the log file when started by a client)."""
    stamp = datetime.now().astimezone().isoformat(timespec="seconds")
    print(f"{stamp} [{os.getpid()}] {line}", file=sys.stderr, flush=True)


class Session:
    """One connected client: its name, and an outbox that one task writes to the socket."""

    def __init__(self, stream: SocketStream, name: str) -> None:
        self.stream = stream
        self.name = name
        self._outbox, self._pending = anyio.create_memory_object_stream[bytes](math.inf)
        self.written = anyio.Event()  # the outbox is closed and all of it went out

    def post(self, frame: dict[str, Any] | bytes) -> None:
        data = frame if isinstance(frame, bytes) else wire.encode(frame)
        with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._outbox.send_nowait(data)

    async def write_out(self) -> None:
        try:
            with contextlib.suppress(anyio.BrokenResourceError, anyio.ClosedResourceError, OSError):
                async for data in self._pending:
                    await self.stream.send(data)
        finally:
            self.written.set()

    def close(self) -> None:
        self._outbox.close()


@dataclasses.dataclass
class _Ask:
    frame: dict[str, Any]
    session: Session | None
    answered: anyio.Event = dataclasses.field(default_factory=anyio.Event)
    decision: Decision = "deny"


class Service:
    """The sessions of one service around its agent (set once the agent is open)."""

    def __init__(
        self, home: Path, idle_seconds: float, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.home = home
        self.idle_seconds = idle_seconds
        self.clock = clock
        self.agent: Agent | None = None
        self.sessions: list[Session] = []
        self.stopping = anyio.Event()
        self.stop_reason = ""
        self.sender: Session | None = None  # who sent the latest message: asked first
        self.asks: dict[str, _Ask] = {}
        self.last_active = clock()
        self._joined = anyio.Event()  # set (and replaced) when a client connects
        self.first_words: list[object] = []  # events for the first client alone
        self.settings_read = settings_stamp(home)  # config.toml and instructions.md, at start

    # -- the agent's side -----------------------------------------------------------------

    def _agent(self) -> Agent:
        assert self.agent is not None, "the service's agent is not open yet"
        return self.agent

    async def ask(self, tool: str, tool_input: dict[str, Any]) -> Decision:
        """The Asker of the agent: the question goes to a client, whose answer decides."""
        ask_id = uuid.uuid4().hex
        frame: dict[str, Any] = {
            "type": "ask",
            "id": ask_id,
            "tool": tool,
            "input": dict(tool_input),
            "agent": getattr(tool_input, "agent", None),
            "outside": getattr(tool_input, "outside", False),
        }
        pending = _Ask(frame, None)
        self.asks[ask_id] = pending
        await self._agent().events_sent()  # the events before the question go first
        try:
            with anyio.move_on_after(ASK_SECONDS):
                while not pending.answered.is_set():
                    if pending.session is None or pending.session not in self.sessions:
                        pending.session = self._asked()
                        if pending.session is not None:
                            pending.session.post(frame)
                    with anyio.move_on_after(1.0 if pending.session else ASK_SECONDS):
                        await (pending.answered if pending.session else self._joined).wait()
            if not pending.answered.is_set():
                self._agent_said(f"no window answered whether {tool} may run: denied")
            return pending.decision
        finally:
            del self.asks[ask_id]

    def _asked(self) -> Session | None:
        if self.sender in self.sessions:
            return self.sender
        return self.sessions[0] if self.sessions else None

    def _agent_said(self, text: str) -> None:
        self.broadcast(events.MemoryWarning(f"service: {text}"))

    def broadcast(self, event: object) -> None:
        data = wire.encode(wire.event_frame(event))
        for session in self.sessions:
            session.post(data)

    async def pump_events(self) -> None:
        """Every event of the agent to every client; `quiet` after a turn that leaves nothing
        to do (a `-p` client goes then)."""
        agent = self._agent()
        async for event in agent.events():
            self.broadcast(event)
            if isinstance(event, events.TurnEnded) and not self._busy():
                self.broadcast(events.Quiet())

    def _busy(self) -> bool:
        agent = self._agent()
        return agent.busy or bool(agent.subagents.running)

    def _working(self) -> bool:
        """A client, a turn, a subagent, or compaction work that can go on: not idle."""
        if self.sessions or self._busy():
            return True
        status = self._agent().compactor.status()
        return status.running > 0 or status.queued > 0

    async def watch_idle(self) -> None:
        while True:
            await anyio.sleep(min(5.0, max(0.05, self.idle_seconds / 4)))
            now = self.clock()
            if self._working():
                self.last_active = now
            elif now - self.last_active >= self.idle_seconds:
                self.stop(f"idle for {self.idle_seconds:g} s")
                return

    def stop(self, reason: str) -> None:
        if not self.stopping.is_set():
            self.stop_reason = reason
            self.stopping.set()
            for session in self.sessions:  # a client then knows not to start another
                session.post({"type": "stopping", "pid": os.getpid(), "reason": reason})

    async def farewell(self) -> None:
        """Let every client's outbox go out (the `stopping` above), briefly."""
        for session in self.sessions:
            session.close()
        with anyio.move_on_after(1.0):
            for session in list(self.sessions):
                await session.written.wait()

    # -- a client's side -------------------------------------------------------------------

    async def handle(self, stream: SocketStream) -> None:
        async with stream:
            if not _same_user(stream):
                await stream.send(wire.encode(_error("peer", "refused: another user's client")))
                return
            reader = wire.FrameReader()
            try:
                greeted = await self._hello(stream, reader)
            except (wire.ProtocolError, TimeoutError, anyio.EndOfStream, OSError) as error:
                with contextlib.suppress(Exception):
                    await stream.send(wire.encode(_error("protocol", str(error) or "no hello")))
                return
            if greeted is None:
                return
            hello, early = greeted
            session = Session(stream, f"{hello.get('client', 'client')} {hello.get('pid', '?')}")
            session.post(self._welcome())
            for event in self.first_words:
                session.post(wire.event_frame(event))
            self.first_words = []
            self.sessions.append(session)
            self._joined.set()
            self._joined = anyio.Event()
            try:
                async with anyio.create_task_group() as group:
                    group.start_soon(session.write_out)
                    await self._serve(session, stream, reader, early)
                    session.close()
            finally:
                session.close()
                self.sessions.remove(session)
                self.last_active = self.clock()

    async def _hello(
        self, stream: SocketStream, reader: wire.FrameReader
    ) -> tuple[dict[str, Any], list[dict[str, Any]]] | None:
        """The client's hello and the frames that came with it; None when it is refused."""
        with anyio.fail_after(HELLO_SECONDS):
            frames: list[dict[str, Any]] = []
            while not frames:
                frames = reader.feed(await stream.receive())
        hello = frames[0]
        problem = _refusal(hello)
        if problem is not None:
            await stream.send(wire.encode(_error("version", problem)))
            return None
        if hello.get("client") not in WATCHERS and self._stale():
            # the settings changed since the start and nothing runs: the client starts anew
            await stream.send(
                wire.encode(_error("restart", "config.toml or instructions.md changed"))
            )
            self.stop("config.toml or instructions.md changed")
            return None
        return hello, frames[1:]  # sent at once with the hello: served after the welcome

    def _stale(self) -> bool:
        """Whether the settings the service read at start changed, and it may stop for a new
        one to read them: no client connected, no turn, no subagent (the compactor's calls in
        flight land before it goes)."""
        changed = settings_stamp(self.home) != self.settings_read
        quiet = not self.sessions and not self._busy() and not self._agent().compactor.in_flight
        return changed and quiet

    def _welcome(self) -> dict[str, Any]:
        return {
            "type": "welcome",
            "protocol": wire.PROTOCOL,
            "version": __version__,
            "pid": os.getpid(),
            "home": str(self.home),
        }

    async def _serve(
        self,
        session: Session,
        stream: SocketStream,
        reader: wire.FrameReader,
        pending: list[dict[str, Any]],
    ) -> None:
        while True:
            for frame in pending:
                self._request(session, frame)
            try:
                data = await stream.receive()
            except (anyio.EndOfStream, anyio.BrokenResourceError, OSError):
                return
            try:
                pending = reader.feed(data)
            except wire.ProtocolError as error:
                session.post(_error("protocol", str(error)))
                return

    def _request(self, session: Session, frame: dict[str, Any]) -> None:
        kind = frame["type"]
        handler = {
            "send": self._send,
            "retry": self._retry,
            "cancel": self._cancel,
            "status": self._status,
            "answer": self._answer,
            "stop": self._stop,
        }.get(kind)
        if handler is None:
            session.post(_error("protocol", f"unknown request {kind!r}"))
            return
        try:
            handler(session, frame)
        except (ValueError, TypeError, KeyError) as error:
            session.post(_error("bad_request", f"{kind}: {error}"))

    def _send(self, session: Session, frame: dict[str, Any]) -> None:
        agent = self._agent()
        key = frame.get("key")
        if not isinstance(key, str) or not key:
            key = None
        if key is not None and agent.holds_key(key):  # a client that sent it before it lost us
            session.post({"type": "accepted", "key": key, "duplicate": True})
            return
        text = frame["text"]
        if not isinstance(text, str):
            raise TypeError("text is not a string")
        workdir = _workdir(frame, agent.runtime.config.workdir_path)
        images = [_image(item) for item in frame.get("images") or []]
        held = agent.busy
        agent.submit(text, images, key=key, workdir=workdir)
        self.sender = session
        session.post({"type": "accepted", "key": key, "duplicate": False, "held": held})
        if held:
            self.broadcast(events.MessageHeld(text, session.name))

    def _retry(self, session: Session, frame: dict[str, Any]) -> None:
        try:
            ids = self._agent().retry()
        except NothingToRetry as error:
            session.post(_error("nothing_to_retry", str(error)))
            return
        self.sender = session
        session.post({"type": "accepted", "ids": ids, "duplicate": False})

    def _cancel(self, session: Session, frame: dict[str, Any]) -> None:
        self._agent().cancel()
        session.post({"type": "ok"})

    def _status(self, session: Session, frame: dict[str, Any]) -> None:
        status = dataclasses.asdict(self._agent().status())
        session.post(
            {
                "type": "status",
                "pid": os.getpid(),
                "version": __version__,
                "clients": len(self.sessions),
                **status,
            }
        )

    def _answer(self, session: Session, frame: dict[str, Any]) -> None:
        pending = self.asks.get(str(frame.get("id")))
        decision = frame.get("decision")
        if pending is None or decision not in DECISIONS:
            return  # withdrawn meanwhile (the turn was cancelled), or answered elsewhere
        pending.decision = decision
        pending.answered.set()

    def _stop(self, session: Session, frame: dict[str, Any]) -> None:
        self.stop(f"asked by {session.name}")


def _workdir(frame: dict[str, Any], configured: Path | None) -> Path | None:
    """Where the tools of a message's turn work: the client's `--workdir`, else `workdir` of
    config.toml, else the folder the client runs in (as `-p` decides on its own)."""
    for value in (frame.get("workdir"), configured, frame.get("cwd")):
        if isinstance(value, str | Path) and os.path.isabs(value):
            return Path(value)
    return None


def settings_stamp(home: Path) -> tuple[tuple[int, int] | None, ...]:
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


def _image(item: object) -> Image:
    if not isinstance(item, dict):
        raise TypeError("an image is an object")
    return Image(str(item["media_type"]), str(item["data"]))


def _error(kind: str, message: str) -> dict[str, Any]:
    return {"type": "error", "kind": kind, "message": message}


def _refusal(hello: dict[str, Any]) -> str | None:
    """Why a client's hello is refused: not a hello, another protocol or version."""
    if hello.get("type") != "hello":
        return "the first frame must be a hello"  # answered as a refusal of kind `version`
    if hello.get("protocol") != wire.PROTOCOL or hello.get("version") != __version__:
        return (
            f"the service runs evertalk {__version__} (protocol {wire.PROTOCOL}) and this "
            f"client is {hello.get('version')} (protocol {hello.get('protocol')}): restart the "
            "service with `evertalk service stop`, and run the command again"
        )
    return None


def _same_user(stream: SocketStream) -> bool:
    """On Linux, whether the peer runs as this user (SO_PEERCRED); elsewhere the socket's mode
    and the home's are the guard."""
    option = getattr(socket, "SO_PEERCRED", None)
    if option is None:
        return True
    raw = stream.extra(SocketAttribute.raw_socket)
    creds = raw.getsockopt(socket.SOL_SOCKET, option, struct.calcsize("3i"))
    _, uid, _ = struct.unpack("3i", creds)
    return bool(uid == os.getuid())


async def serve(home: Path, idle_seconds: float = IDLE_SECONDS) -> None:
    """Open the chat, listen, serve until stopped or idle. ChatLocked (another owner) and the
    errors of opening the agent propagate."""
    service = Service(home, idle_seconds)
    async with Agent.open(home, asker=service) as agent:
        service.agent = agent
        for warning in agent.chat.warnings:  # what the open repaired: for the first client
            log(f"warning: {warning}")
            service.first_words.append(events.MemoryWarning(f"evertalk: warning: {warning}"))
        path = socket_path(home)
        listener = await _listen(path)
        log(f"evertalk {__version__} serving {home} on {path}")
        try:
            async with listener, anyio.create_task_group() as group:
                group.start_soon(service.pump_events)
                group.start_soon(service.watch_idle)
                group.start_soon(_stop_on_signals, service)
                group.start_soon(listener.serve, service.handle)
                await service.stopping.wait()
                path.unlink(missing_ok=True)  # a client from now on starts the next service
                log(f"stopping: {service.stop_reason}")
                with anyio.move_on_after(agent.compactor.settings.deadline):
                    await agent.compactor.drain()
                await service.farewell()
                group.cancel_scope.cancel()
        finally:
            path.unlink(missing_ok=True)
    log("stopped")


async def _listen(path: Path) -> Any:
    if path.parent.name.startswith("evertalk-"):  # the private folder of a deep home's socket
        path.parent.mkdir(mode=0o700, exist_ok=True)
        if path.parent.stat().st_uid != os.getuid():
            raise OSError(f"{path.parent} belongs to another user")
    # We hold the chat's lock: a socket left here belongs to a service that is gone.
    path.unlink(missing_ok=True)
    old = os.umask(0o177)  # the socket is born 0600: no window in which others may connect
    try:
        listener = await anyio.create_unix_listener(path)
    finally:
        os.umask(old)
    return listener


async def _stop_on_signals(service: Service) -> None:
    with anyio.open_signal_receiver(signal.SIGTERM, signal.SIGINT, signal.SIGHUP) as signals:
        async for received in signals:
            service.stop(f"signal {signal.Signals(received).name}")
            return
