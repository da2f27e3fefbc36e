"""The service: one process per home owns the chat and serves its clients on a Unix socket.

Order at start: the agent opens the chat (its lock: a second service fails there, as any second
owner does), then the socket is bound. Any socket file found then is stale, since whoever made
it no longer holds the lock, and it is removed first. The socket is the owner's alone (0600 in
the 0700 home), and on Linux each peer's uid is checked as well (SO_PEERCRED).

Each connection: a `hello` with the client's protocol and version, answered by `welcome` or by
an `error` that says how to restart the service; from then on the client gets every event of
the agent as a frame (`protocol/wire.py`), and sends requests (`requests.py`: a message with an
idempotency key and the client's working directory, a cancel, the status, slash commands, the
log's messages, …). One task writes to each connection, from its outbox.

A permission request goes to the client that sent the latest message, or, when that one has
gone, to any other; with none connected it waits ASK_SECONDS for one, then is denied. When it
ends otherwise (answered, the turn cancelled) the window asked is told to close its dialog.

The service stays while a client is connected, a turn runs, a subagent works or a compaction
call runs or can start, and exits after `idle_seconds` without any of them. SIGTERM or a `stop`
request end it at once, after the compaction calls in flight land (each is paid for).
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import time
import uuid
from collections.abc import Callable
from contextlib import AbstractAsyncContextManager
from pathlib import Path
from typing import Any, TypeVar

import anyio
import msgspec
from anyio.abc import SocketStream

from evertalk import __version__
from evertalk.agent.asking import ask_frame
from evertalk.agent.permissions import Decision
from evertalk.agent.retry import has_unanswered
from evertalk.agent.session import Agent, NotConfigured
from evertalk.compactor.service import Compactor
from evertalk.config import ConfigError
from evertalk.protocol import environment, events, frames, replies, requests, wire
from evertalk.protocol.paths import log, socket_folder_problem
from evertalk.providers.base import ProviderError
from evertalk.service import commands
from evertalk.service.context import NotReady, Reply
from evertalk.service.follow import Followers, Unread
from evertalk.service.forget_requests import before_forget
from evertalk.service.read_ahead import read_ahead
from evertalk.service.requests import HANDLERS
from evertalk.service.session import Session, error_frame, refusal, same_user
from evertalk.service.settings_watch import settings_stamp, watch_settings
from evertalk.service.socket_place import listen_path
from evertalk.slash import MODEL
from evertalk.store.errors import ChatLocked, StoreError
from evertalk.store.probe import write_problem

IDLE_SECONDS = 600.0
ASK_SECONDS = 120.0
HELLO_SECONDS = 10.0
FIRST_WORDS_MOST = 20  # warnings kept for the next client while none is connected
WATCHERS = frozenset({"status", "stop", "serve", "test", "usage"})
"""Clients that only look at the service or end it: a change of settings does not restart it
for them."""
ASKED = frozenset({"app", "-p"})
"""Clients that answer a permission request: the windows, and `-p` (by its `--allow`)."""
RECOVERS = (requests.Send, requests.Retry, requests.Command, requests.GetCompact)
"""Requests that may change the chat: a chat stopped by a full disk is reopened before them, once
the disk takes writes again (`Service.recover`). A look at the status does not probe the disk."""
REFUSED_WHILE_FULL = (requests.Send, requests.Retry)
"""… and those refused while it does not (a slash command may only read)."""
FOLLOW_READ_WAIT = 10.0
FOLLOW_READ_AGAIN = 0.5
"""A window's `missed` waits up to FOLLOW_READ_WAIT seconds for a shared chat's database to
answer (then the window is refused, and connects again); the messages logged meanwhile are
read again every FOLLOW_READ_AGAIN seconds until the windows have them."""
REOPEN_WAIT = 30.0
"""Seconds a request waits for the agent a reopen opens (a large chat takes a while)."""
STOP_LANDING = 3.0
"""Seconds a stopping service lets the summaries in flight land before it cancels them."""
HEAL_SECONDS = 0.5
HEAL_MOST = 60.0
"""A chat stopped by a full disk is also reopened without any request: tried HEAL_SECONDS after
it stopped, then twice as long after each try, up to HEAL_MOST (a disk may stay full for hours)."""


@dataclasses.dataclass
class _Ask:
    frame: replies.Ask
    session: Session | None
    answered: anyio.Event = dataclasses.field(default_factory=anyio.Event)
    decision: Decision = "deny"
    told: set[Session] = dataclasses.field(default_factory=set)  # `asked_elsewhere` went there


AgentOpener = Callable[["Service"], AbstractAsyncContextManager[Agent]]


def open_agent(service: Service) -> AbstractAsyncContextManager[Agent]:
    """The service's agent: the settings in config.toml, the service as its asker."""
    return Agent.open(service.home, asker=service)


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
        # `memory compact` clients, each with its wait on the compactor it asked (SPEC §4.5)
        self.compacting: dict[Session, tuple[Compactor, contextlib.ExitStack]] = {}
        self.closed = anyio.Event()  # the last agent has closed
        self._reopen = anyio.Event()
        self._opened = anyio.Event()  # set when an agent opens, replaced when one closes
        self._recovering: str | None = None  # why a reopen under way was due (see `recover`)
        self._recovery = anyio.Lock()  # one recovery at a time, for every client's request
        self._broke = anyio.Event()  # set when the chat is seen stopped by a failed write
        self._heal_after = HEAL_SECONDS  # the wait before the next try (`_heal`)
        self.followers = Followers()  # the log's position, for the windows that follow it

    # -- the agent's side -----------------------------------------------------------------

    @property
    def clients(self) -> int:
        """Clients connected now."""
        return len(self.sessions)

    def agent_open(self) -> Agent:
        """The agent; NotReady while a reopen has none, or the one it has is closing."""
        if self.agent is None or self.agent.closed:
            raise NotReady("the new settings are being applied: a moment")
        return self.agent

    def settings_saved(self) -> None:
        """The service itself wrote config.toml (a model change): what it runs on is the
        file's, and no client need restart it for that."""
        self.settings_read = settings_stamp(self.home)

    async def ask(self, tool: str, tool_input: dict[str, Any]) -> Decision:
        """The Asker of the agent: the question goes to a client, whose answer decides."""
        ask_id = uuid.uuid4().hex
        pending = _Ask(msgspec.convert(ask_frame(ask_id, tool, tool_input), replies.Ask), None)
        self.asks[ask_id] = pending
        await self.agent_open().events_sent()  # the events before the question go first
        try:
            if not await self._answered(pending):
                self._agent_said(f"no window was open to answer whether {tool} may run: denied")
            return pending.decision
        finally:
            del self.asks[ask_id]
            if pending.session is not None:  # its dialog goes: answered, or no longer asked
                pending.session.post(replies.AskClosed(id=ask_id))
                for session in pending.told:  # and the others' line that a window is asked
                    session.post(replies.AskClosed(id=ask_id))

    async def _answered(self, pending: _Ask) -> bool:
        """Wait for a window's answer, as long as one is connected: the user may be away for a
        while. With none, ASK_SECONDS in all; False when that passed unanswered."""
        alone = 0.0
        while not pending.answered.is_set():
            if pending.session is None or pending.session not in self.sessions:
                pending.session = self._asked()
                if pending.session is not None:
                    pending.session.post(pending.frame)
                    self._asked_elsewhere(pending, pending.session)
            if pending.session is not None:
                with anyio.move_on_after(1.0):  # then look again: the window may have gone
                    await pending.answered.wait()
                continue
            if alone >= ASK_SECONDS:
                return False
            began = self.clock()
            with anyio.move_on_after(ASK_SECONDS - alone):
                await self._joined.wait()
            alone += self.clock() - began
        return True

    def _asked_elsewhere(self, pending: _Ask, asked: Session) -> None:
        """Tell the other windows that the turn waits for an answer in `asked`: theirs would
        otherwise seem stuck."""
        frame = pending.frame
        told = replies.AskedElsewhere(id=frame.id, tool=frame.tool, client=asked.name)
        for session in self.sessions:
            if session is not asked and session.asked:
                session.post(told)
                pending.told.add(session)

    def answer(self, ask_id: str, decision: Decision) -> None:
        pending = self.asks.get(ask_id)
        if pending is not None:
            pending.decision = decision
            pending.answered.set()

    def _asked(self) -> Session | None:
        """Who is asked: the sender of the message the turn answers, else another window."""
        if self.sender in self.sessions:
            return self.sender
        return next((session for session in self.sessions if session.asked), None)

    def _agent_said(self, text: str) -> None:
        self.broadcast(events.MemoryWarning(f"service: {text}"))

    def broadcast(self, event: object) -> None:
        if not self.sessions and isinstance(event, events.MemoryWarning):
            # said with no window open: the next client to connect is told
            self.first_words = [*self.first_words, event][-FIRST_WORDS_MOST:]
        self.broadcast_frame(frames.encode_event(event))

    async def keep_agents(
        self, opener: AgentOpener, *, task_status: anyio.abc.TaskStatus[None]
    ) -> None:
        """Hold the agent from its opening to its closing, in this task (its task group asks
        for that): the first, then a new one on the saved settings at each `reopen`, until the
        service stops. A reopen that fails stops the service, saying why. The costs so far go
        over to each new agent: its status says what the whole session cost."""
        first = True
        spent = (0.0, 0.0)  # turns and subagents, summaries: of the agents closed so far
        while not self.stopping.is_set():
            try:
                async with opener(self) as agent:
                    self.agent = agent
                    agent.carry_costs(*spent)
                    self.settings_read = settings_stamp(self.home)
                    self._follow_again(agent)
                    if first:
                        first = False
                        self._opened_first(agent)
                        task_status.started()
                    elif self._recovering is not None:
                        self._recovered(self._recovering)
                    else:
                        self.broadcast_frame(self._reopened(agent))
                    self._opened.set()
                    await self._run_agent(agent)
                spent = (agent.turn_cost, agent.compactor.cost)  # closed: nothing more comes
            except (ChatLocked, ConfigError, NotConfigured, StoreError, ProviderError) as error:
                if first:
                    raise
                why = f"cannot open the chat with the new settings: {error}"
                if self._recovering is not None:
                    why = f"cannot reopen the chat: {error}"
                log(why)
                self.broadcast(events.MemoryWarning(f"service: {why}"))
                self.stop(why)
                self._opened.set()
            finally:
                self.agent = None
        self.closed.set()

    def _follow_again(self, agent: Agent) -> None:
        """An agent opened: the windows that follow the log get what was logged since they
        last heard (the end of a turn a forget cancelled), what a forget changed, and those
        that connected meanwhile, what they missed."""
        self.followers.opened(agent)
        self.advance()
        self.followers.tell_changes(self.sessions, agent)
        for session in self.sessions:
            if session.since is not None:
                since, session.since = session.since, None
                try:
                    self.followers.join(session, since, session.edits, agent, self.busy())
                except Unread:  # it connects again, and is told then
                    session.refuse_unread()

    def advance(self) -> None:
        """The messages logged since the windows that follow the log last heard, once every
        event before them went out (`follow.py`)."""
        if self.agent is not None:
            self.followers.advance(self.sessions, self.agent)

    def _opened_first(self, agent: Agent) -> None:
        for warning in agent.chat.warnings:  # what the open repaired: for the first client
            log(f"warning: {warning}")
            self.first_words.append(events.MemoryWarning(f"evertalk: warning: {warning}"))

    def _recovered(self, why: str) -> None:
        self._recovering = None
        said = "the disk takes writes again: the chat was reopened and goes on"
        log(f"{said} (it had stopped: {why})")
        self.broadcast(events.MemoryWarning(f"service: {said}"))

    async def recover(self) -> str | None:
        """A chat that takes no changes until it is reopened (a write failed: a full disk) is
        reopened here, before a request that would change it, once the disk takes writes again;
        why it cannot be yet, or None. Not while a turn or a subagent works: they hold what the
        agent would lose, and end at their next write meanwhile."""
        if self.agent is None or self.agent.chat.broken is None:
            return None  # the usual case: no await, so requests keep their order with events
        async with self._recovery:
            agent = self.agent
            if agent is None or agent.chat.broken is None or self.busy():
                return None
            problem = await anyio.to_thread.run_sync(write_problem, agent.chat.folder)
            if problem is not None:
                return problem
            self._recovering = agent.chat.broken
            self.reopen()
            await self._opened.wait()
        return None

    def _reopened(self, agent: Agent) -> replies.Reopened:
        config = agent.runtime.config
        log(f"reopened on new settings: {config.provider}, model {agent.model}")
        return replies.Reopened(
            provider=config.provider, model=agent.model, base_url=config.base_url
        )

    async def _run_agent(self, agent: Agent) -> None:
        """Its events to the clients until the service stops (then the compaction calls in
        flight land, each paid for) or reopens."""
        self._reopen = anyio.Event()
        async with anyio.create_task_group() as group:
            group.start_soon(self.pump_events)
            group.start_soon(self._heal, agent)
            group.start_soon(self._catch_up_followers, agent)
            group.start_soon(_load_sdks, agent)
            async with anyio.create_task_group() as either:
                for event in (self.stopping, self._reopen):
                    either.start_soon(_set_then_cancel, event, either.cancel_scope)
            if self.stopping.is_set():
                await self._land_in_flight(agent)
            group.cancel_scope.cancel()

    async def _land_in_flight(self, agent: Agent) -> None:
        """Let the summaries in flight land (each is paid for) for STOP_LANDING seconds at
        most, saying so; then cancel them, so that a stop never waits on a slow model. A
        cancelled call whose reply had begun is in the ledger as billed; the log counts them
        all, and their nodes are sent again next time."""
        compactor = agent.compactor
        count = len(compactor.in_flight)
        if count:
            lines = "summary" if count == 1 else "summaries"
            self.broadcast(
                events.MemoryWarning(
                    f"service: stopping once the {count} {lines} in flight land (at most "
                    f"{STOP_LANDING:g} s, then they are cancelled)"
                )
            )
        with anyio.move_on_after(STOP_LANDING):
            await compactor.drain()
        if compactor.in_flight:
            cancelled = len(compactor.cancel_in_flight())
            log(f"cancelled {cancelled} summary calls in flight: their nodes go at the next start")
            with anyio.move_on_after(1.0):  # a cancelled call ends at once: within the lock wait
                await compactor.drain()

    def reopen(self) -> None:
        """Close the agent and open one on the settings saved now (`/setup`, a forget): the
        requests that come meanwhile wait for it (`_until_open`)."""
        if not self._reopen.is_set():
            self._opened = anyio.Event()
        self._reopen.set()

    async def _until_open(self) -> None:
        """While the agent closes and another opens, a request waits for the new one (the
        one closing takes no changes): REOPEN_WAIT at most, then it is answered as the
        service stands."""
        if self._reopen.is_set() and not self.stopping.is_set():
            with anyio.move_on_after(REOPEN_WAIT):
                await self._opened.wait()

    async def _catch_up_followers(self, agent: Agent) -> None:
        """Messages the windows could not be sent (a shared chat's database did not answer):
        read ahead in its thread, then sent, every FOLLOW_READ_AGAIN seconds until they are."""
        while True:
            await anyio.sleep(FOLLOW_READ_AGAIN)
            covered = self.followers.covered
            if not self.followers.stalled or covered is None:
                continue
            with contextlib.suppress(StoreError):
                await agent.chat.aread_records(covered, agent.chat.t)
            self.advance()

    async def _heal(self, agent: Agent) -> None:
        """Reopen a chat stopped by a failed write once the disk takes writes again, without
        waiting for a request: a message accepted before it stopped waits in held.jsonl, and
        the reopen answers it. Each try waits longer (HEAL_SECONDS); a reopen ends this task."""
        while True:
            if agent.chat.broken is None:
                await self._broke.wait()
                self._broke = anyio.Event()
                continue
            await anyio.sleep(self._heal_after)
            self._heal_after = min(2 * self._heal_after, HEAL_MOST)
            await self.recover()  # not yet while the disk is full, or a turn runs

    def _watch_chat(self, event: object = None) -> None:
        """Wake `_heal` when the chat is stopped; a turn that ended well resets its wait."""
        agent = self.agent
        if agent is not None and agent.chat.broken is not None:
            self._broke.set()
        elif isinstance(event, events.TurnEnded) and event.reason == "done":
            self._heal_after = HEAL_SECONDS

    def broadcast_frame(self, frame: msgspec.Struct | bytes) -> None:
        data = frame if isinstance(frame, bytes) else frames.encode_frame(frame)
        for session in self.sessions:
            session.post(data)

    async def pump_events(self) -> None:
        """Every event of the agent to every client; `quiet` after a turn that leaves nothing
        to do (a `-p` client goes then)."""
        agent = self.agent_open()
        async for event in agent.events():
            if isinstance(event, events.TurnEnded) and event.reason not in ("done", "cancelled"):
                event = msgspec.structs.replace(event, retry=has_unanswered(agent.chat))
            self.broadcast(event)
            self._watch_chat(event)
            if isinstance(event, events.TurnEnded) and not self.busy():
                self.broadcast(events.Quiet())
            self.advance()

    def busy(self) -> bool:
        agent = self.agent
        return agent is not None and (agent.busy or bool(agent.subagents.running))

    def _working(self) -> bool:
        """A client, a turn, a subagent, or a compaction call running or able to start: not
        idle (SPEC §11). Queued nodes that cannot start are none: a paused compactor's, leaves
        behind the leaf window, failed nodes that wait for a message (none may come)."""
        if self.agent is None or self.sessions or self.busy():
            return True
        return self.agent.compactor.can_start()

    async def watch_idle(self) -> None:
        while True:
            await anyio.sleep(min(5.0, max(0.05, self.idle_seconds / 4)))
            now = self.clock()
            if self._working():
                self.last_active = now
            elif now - self.last_active >= self.idle_seconds:
                self.stop(f"idle for {self.idle_seconds:g} s")
                return

    def stop(self, reason: str, *, on_purpose: bool = False) -> None:
        """Stop, saying why to every client. `on_purpose`: someone asked for it (`service
        stop`, `memory repair`, a signal), so the windows start no other until their user acts."""
        if not self.stopping.is_set():
            self.stop_reason = reason
            self.stopping.set()
            self._opened.set()  # no agent opens now: a request that waits for one goes on
            if self.agent is not None:  # a turn it cuts off says who stopped it
                self.agent.closing(f"the service stopped ({reason})")
            for session in self.sessions:  # a client then knows not to start another
                session.post(
                    replies.Stopping(pid=os.getpid(), reason=reason, on_purpose=on_purpose)
                )

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
            if not same_user(stream):
                refused = error_frame("peer", "refused: another user's client")
                await stream.send(frames.encode_frame(refused))
                return
            reader = wire.FrameReader()
            try:
                greeted = await self._hello(stream, reader)
            except (wire.ProtocolError, TimeoutError, anyio.EndOfStream, OSError) as error:
                with contextlib.suppress(Exception):
                    said = error_frame("protocol", str(error) or "no hello")
                    await stream.send(frames.encode_frame(said))
                return
            if greeted is None:
                return
            hello, early = greeted
            kind = hello.client
            pid = "?" if hello.pid is None else hello.pid
            session = Session(
                stream, f"{kind} {pid}", asked=kind in ASKED, watcher=kind in WATCHERS
            )
            session.post(self._welcome(session))
            if not isinstance(hello.since, msgspec.UnsetType):  # what it missed, first
                edits = None if isinstance(hello.edits, msgspec.UnsetType) else hello.edits
                if not await self._follow(session, hello.since, edits):
                    await session.close_unread()
                    return
            names = [] if kind in WATCHERS else environment.differing(hello.env)
            if names:  # it was not restarted for this client: say what holds it
                line = environment.kept_line(names, self._held_by())
                session.post(frames.encode_frame(events.MemoryWarning(line)))
            if session.asked:  # a window or -p: a look at the status need not hear them
                for event in self.first_words:
                    session.post(frames.encode_event(event))
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
                self._left(session)

    async def _hello(
        self, stream: SocketStream, reader: wire.FrameReader
    ) -> tuple[requests.Hello, list[bytes]] | None:
        """The client's hello and the lines that came with it; None when it is refused. A
        first line that is no frame at all is a FrameError (a ProtocolError)."""
        with anyio.fail_after(HELLO_SECONDS):
            lines: list[bytes] = []
            while not lines:
                lines = reader.lines(await stream.receive())
        hello = _hello_in(lines[0])
        problem = hello if isinstance(hello, str) else refusal(hello)
        if problem is not None or not isinstance(hello, requests.Hello):
            await stream.send(frames.encode_frame(error_frame("version", problem or "")))
            return None
        why = self._restart_for(hello)
        if why is not None:  # nothing runs: the client starts a service on what it sees
            await stream.send(frames.encode_frame(error_frame("restart", why)))
            self.stop(why)
            return None
        return hello, lines[1:]  # sent at once with the hello: served after the welcome

    async def _follow(self, session: Session, since: int, edits: int | None) -> bool:
        """A window that follows the log from `since`, having applied `edits` in-place
        changes: what it missed now, or once the chat is open again (a reopen under way).
        Whether it could be told: a shared chat's messages it missed are read ahead in the
        database's thread, tried again for FOLLOW_READ_WAIT seconds while it does not answer."""
        session.edits = edits
        agent = self.agent
        if agent is None:
            session.since = since
            return True
        deadline = anyio.current_time() + FOLLOW_READ_WAIT
        while True:
            with contextlib.suppress(StoreError):
                await agent.chat.aread_records(*self.followers.missed_span(since, agent))
            try:
                self.followers.join(session, since, edits, agent, self.busy())
                return True
            except Unread:
                if anyio.current_time() > deadline or agent is not self.agent:
                    return False
                await anyio.sleep(FOLLOW_READ_AGAIN)

    def _held_by(self) -> str | None:
        """What keeps this service from stopping for a client's new settings: another client
        than a mere look at its status, a turn or a subagent at work; None when nothing does
        (summaries in flight land, or are cancelled, as it stops)."""
        if self.agent is None:
            return "the chat being opened"
        others = sum(1 for session in self.sessions if not session.watcher)
        if others:
            return "another client uses it" if others == 1 else f"{others} other clients use it"
        return "a turn runs" if self.busy() else None

    def _restart_for(self, hello: requests.Hello) -> str | None:
        """Why this client should have a new service start: the settings changed since this
        one read them, or the client sees other provider variables than it started with. Only
        while nothing holds it (`_held_by`)."""
        if hello.client in WATCHERS or self._held_by() is not None:
            return None
        if settings_stamp(self.home) != self.settings_read:
            return "config.toml or instructions.md changed"
        names = environment.differing(hello.env)
        return environment.changed_line(names) if names else None

    def _welcome(self, session: Session) -> replies.Welcome:
        return replies.Welcome(
            protocol=wire.PROTOCOL,
            version=__version__,
            pid=os.getpid(),
            home=str(self.home),
            name=session.name,  # as `sent` events name this client
        )

    def _left(self, session: Session) -> None:
        self.last_active = self.clock()
        if self.sender is session:
            self.sender = None
        held = self.compacting.pop(session, None)
        if held is not None:  # its wait ends; a turn's, or another client's, goes on
            held[1].close()

    def compaction_awaited(self, session: Session, compactor: Compactor) -> None:
        """A `memory compact` client waits: failed nodes are retried on the timer until it
        leaves. Once per client and compactor (a reopen brings a new one)."""
        held = self.compacting.get(session)
        if held is not None and held[0] is compactor:
            return
        if held is not None:
            held[1].close()
        wait = contextlib.ExitStack()
        wait.enter_context(compactor.waiting())
        self.compacting[session] = (compactor, wait)

    async def _serve(
        self,
        session: Session,
        stream: SocketStream,
        reader: wire.FrameReader,
        pending: list[bytes],
    ) -> None:
        while True:
            for line in pending:
                try:
                    request = frames.decode_request(line)
                except frames.FrameError as error:
                    if error.problem == "not_a_frame":  # the connection cannot go on
                        session.post(error_frame("protocol", str(error)))
                        return
                    session.post(_refused(error))
                    continue
                await self._until_open()
                if await self._refused_for_disk(session, request):
                    continue
                await self._prepare(request)
                self._request(session, request)
            try:
                data = await stream.receive()
            except (anyio.EndOfStream, anyio.BrokenResourceError, OSError):
                return
            try:
                pending = reader.lines(data)
            except wire.ProtocolError as error:
                session.post(error_frame("protocol", str(error)))
                return

    async def _refused_for_disk(self, session: Session, request: frames.ClientFrame) -> bool:
        """Before a request that changes the chat: a chat stopped by a failed write is reopened
        when the disk takes writes again (`recover`); while it does not, a message is refused,
        saying why (whether the request was refused)."""
        if not isinstance(request, RECOVERS):
            return False
        problem = await self.recover()
        if problem is None or not isinstance(request, REFUSED_WHILE_FULL):
            return False
        said = (
            f"the disk takes no writes yet ({problem}): nothing was logged; send it again once "
            "there is room (the service then reopens the chat by itself)"
        )
        session.post(_with_rid(error_frame("store", said), request.rid))
        return True

    async def _prepare(self, request: frames.ClientFrame) -> None:
        """What a request would wait on the network for, asked in a worker thread first, so
        that every other window and turn goes on meanwhile: `/model`'s list of the server's
        models (kept, so that the handler then finds it at once). A forget waits here for the
        turn it cancels to end."""
        await before_forget(self, request)
        await read_ahead(self.agent, request)  # a chat in a database: read in its thread
        if not isinstance(request, requests.Command) or request.name != MODEL.name:
            return
        try:
            agent = self.agent_open()
        except NotReady:
            return  # the handler says so
        await anyio.to_thread.run_sync(commands.model_list, agent)

    def _request(self, session: Session, request: frames.ClientFrame) -> None:
        kind = str(request.__struct_config__.tag)
        handler = HANDLERS.get(type(request))
        reply: Reply
        try:
            if handler is None:  # a hello again: no request of this service
                reply = error_frame("protocol", f"unknown request {kind!r}")
            else:
                reply = handler(self, session, request)
        except NotReady as error:
            reply = error_frame("not_ready", str(error))
        except StoreError as error:  # the chat cannot take this write: the service goes on
            reply = error_frame("store", f"{kind}: {error}")
            self._watch_chat()
        except (ValueError, TypeError, KeyError) as error:
            reply = error_frame("bad_request", f"{kind}: {error}")
        if reply is not None:
            try:
                session.post(frames.encode_frame(_with_rid(reply, request.rid)))
            except wire.ProtocolError as error:  # a reply over the frame limit
                rid = None if request.rid is msgspec.UNSET else request.rid
                session.post(_with_rid(error_frame("too_large", f"{kind}: {error}"), rid))
        self.advance()  # what it logged (an append, an undo's note), to the windows


def _hello_in(line: bytes) -> requests.Hello | str | None:
    """The hello on the first line; None when that is another frame; why, for a hello whose
    fields cannot be read (refused as one of another version). FrameError when it is no frame."""
    try:
        first = frames.decode_request(line)
    except frames.FrameError as error:
        if error.problem == "not_a_frame":
            raise
        if error.frame_type == "hello":
            return f"a {error} (this service runs evertalk {__version__}, protocol {wire.PROTOCOL})"
        return None
    return first if isinstance(first, requests.Hello) else None


def _refused(error: frames.FrameError) -> replies.Error:
    """The answer to a request that could not be read: of an unknown type, or with a field
    missing or wrong."""
    kind: replies.ErrorKind = "protocol" if error.problem == "unknown_type" else "bad_request"
    return _with_rid(error_frame(kind, str(error)), error.rid)


_R = TypeVar("_R", bound=msgspec.Struct)


def _with_rid(reply: _R, rid: object) -> _R:
    """The reply with the request's `rid`, as it came (none when the request had none)."""
    if rid is msgspec.UNSET:
        return reply
    return msgspec.structs.replace(reply, rid=rid)


async def serve(
    home: Path,
    idle_seconds: float = IDLE_SECONDS,
    opener: AgentOpener = open_agent,
    *,
    signals: bool = True,
    task_status: anyio.abc.TaskStatus[Service] = anyio.TASK_STATUS_IGNORED,
) -> None:
    """Open the chat, listen, serve until stopped or idle. ChatLocked (another owner) and the
    errors of opening the agent propagate. Started in a task group, it reports the service
    once it listens. `signals`: SIGTERM, SIGINT and SIGHUP stop it (its own process)."""
    service = Service(home, idle_seconds)
    try:
        await _serve(service, opener, signals, task_status)
    except BaseExceptionGroup as errors:
        # the first open's error (another owner, bad settings) comes out as itself
        if len(errors.exceptions) == 1:
            raise errors.exceptions[0] from None
        raise
    # what the service cost the machine: a service that should rest shows here (`make e2e-local`)
    log(f"stopped after {time.process_time():.2f} s of CPU")


async def _serve(
    service: Service,
    opener: AgentOpener,
    signals: bool,
    task_status: anyio.abc.TaskStatus[Service],
) -> None:
    async with anyio.create_task_group() as agents:
        await agents.start(service.keep_agents, opener)  # the chat is ours before we listen
        _refuse_if_held(service.home)
        path = listen_path(service.home)  # chosen under the chat's lock: one service records it
        listener = await _listen(path)
        log(f"evertalk {__version__} serving {service.home} on {path}")
        try:
            async with listener, anyio.create_task_group() as group:
                group.start_soon(service.watch_idle)
                group.start_soon(watch_settings, service)  # edited files apply between turns
                if signals:
                    group.start_soon(_stop_on_signals, service)
                group.start_soon(listener.serve, service.handle)
                task_status.started(service)
                await service.stopping.wait()
                path.unlink(missing_ok=True)  # a client from now on starts the next service
                log(f"stopping: {service.stop_reason}")
                await service.closed.wait()  # the compactor's calls in flight landed
                await service.farewell()
                group.cancel_scope.cancel()
        finally:
            path.unlink(missing_ok=True)
            service.stop("the service ended")


def _refuse_if_held(home: Path) -> None:
    """A command that owns the chat's files (`memory repair`) may have taken the hold after
    the client that started this service looked, while it opened the chat: then this service
    goes before it listens, and the chat's lock with it (StoreError, its one line)."""
    from evertalk.service_hold import held_by

    held = held_by(home)
    if held is not None:
        raise StoreError(held)


async def _set_then_cancel(event: anyio.Event, scope: anyio.CancelScope) -> None:
    await event.wait()
    scope.cancel()


async def _load_sdks(agent: Agent) -> None:
    """The model SDKs the agent's providers use, imported ahead in a worker thread: the first
    call, a turn's or a summary's, would otherwise wait seconds for them."""
    from evertalk.providers.factory import load_sdk

    config = agent.runtime.config
    for kind in sorted({config.provider, config.memory_provider}):
        try:
            await anyio.to_thread.run_sync(load_sdk, kind)
        except Exception:  # the first call meets it again, and reports it as its own error
            return


async def _listen(path: Path) -> Any:
    problem = socket_folder_problem(path)
    if problem is not None:  # another user could listen there in our place
        raise OSError(f"{problem}: not listening there")
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
            service.stop(f"signal {signal.Signals(received).name}", on_purpose=True)
            return
