"""Turns, one after another (SPEC §6.1): `TurnDriver` starts one whenever messages are held
and none runs, waits for its view, logs its messages and runs its loop; `Stopping` says why a
running turn stops. For a chat shared with other machines, a turn runs only while this machine
holds the chat's turn, and one that loses it is answered again (`lost_turn.py`)."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import suppress
from dataclasses import replace
from typing import TYPE_CHECKING

import anyio
from anyio.abc import TaskGroup

from evertalk.agent.calls import Calls, images_of
from evertalk.agent.guarded_log import GuardedLog
from evertalk.agent.held_queue import HeldQueue
from evertalk.agent.holding import Holding
from evertalk.agent.lost_turn import LOST_LOCK
from evertalk.agent.retry import turn_id
from evertalk.agent.subagents import Subagents
from evertalk.agent.tools.checkpoints import Checkpoints
from evertalk.agent.turn import BY_THE_USER, Held, explain
from evertalk.protocol.events import TurnEnded, TurnStarted
from evertalk.store.errors import StoreError

if TYPE_CHECKING:
    from evertalk.agent.sharing import Sharing


class Stopping:
    """The running turn's cancel scope, and why it stops when it is cancelled: the reason the
    cancel gave, else the session's closing, else the user."""

    def __init__(self) -> None:
        self.scope: anyio.CancelScope | None = None
        self.cancelled_by: str | None = None  # why the running turn was cancelled
        self.closing_by: str | None = None  # why the session is closing (`closing`)

    def cancel(self, why: str = BY_THE_USER) -> None:
        """Cancel the running turn, at once; what it logged stays logged, with `why`."""
        if self.scope is not None:
            self.cancelled_by = self.cancelled_by or why
            self.scope.cancel()

    def closing(self, why: str) -> None:
        """The session is about to close for `why`: a turn still running then is logged as
        stopped for it, not as cancelled by the user."""
        self.closing_by = why

    def why(self) -> str:
        return self.cancelled_by or self.closing_by or BY_THE_USER


class TurnDriver:
    """The turns of one session, the messages held for them (durable, SPEC §6.4), and the
    subagents its turns start in `group` (their reports are held like messages)."""

    def __init__(
        self,
        calls: Calls,
        stopping: Stopping,
        group: TaskGroup,
        *,
        turn_log: GuardedLog,
        checkpoints: Checkpoints,
    ) -> None:
        chat, images = calls.chat, calls.images
        self.calls, self.stopping, self.chat = calls, stopping, chat
        self.log, self.turn_log, self.checkpoints = calls.log, turn_log, checkpoints
        self.held = HeldQueue(chat.folder, images, calls.clock)
        self.holding = Holding(
            self.held, self.log, images, chat, woken=self.woken, turning=lambda: self.turning
        )
        self.subagents = Subagents(
            calls.agents_dir,
            group,
            calls.run_subagent,
            self.holding.hold,
            self.changed,
            record=self.holding.record_now,
            stopped=self.holding.report_stopped,
        )
        calls.start_agent = self.subagents.start
        self.sharing: Sharing | None = None  # a chat shared with other machines (`share`)
        self.turning = False
        self._wake = anyio.Event()
        self._change = anyio.Event()
        self._opened = False
        self._taken: list[Held] = []  # what the running turn took: held again if it lost its lock
        self._turn_no = 0  # the running turn's id (`turn_id`), once it has logged its opening
        self._lost_stop: int | None = None  # a turn that lost its lock: its stop, to be logged

    @property
    def busy(self) -> bool:
        """A turn runs, or messages are held for one."""
        return self.turning or bool(self.held)

    def changed(self) -> None:
        """Whatever waits for a change looks again."""
        self._change.set()
        self._change = anyio.Event()

    def woken(self) -> None:
        """A turn may have something new to take."""
        self._wake.set()
        self.changed()

    async def until(self, done: Callable[[], bool]) -> None:
        """Until `done()` holds, looked at after each change."""
        while not done():
            await self._change.wait()

    async def stop_turn(self, why: str) -> None:
        """Cancel the running turn for `why` and return once it has ended, its stop logged (a
        turn that starts meanwhile, for a message held, is cancelled too)."""
        while self.turning:
            self.stopping.cancel(why)
            await self._change.wait()

    def close(self) -> None:
        """No more turns: messages typed but never delivered are still the user's words."""
        try:
            if self.held:
                self.holding.log_all(self.held.take())
            self.held.settle(self.chat.logged)
        finally:
            self.held.close()

    async def drive(self) -> None:
        """Start a turn whenever messages are held and none runs."""
        while True:
            if not self.held:
                self._wake = anyio.Event()
                await self._wake.wait()
                continue
            if self.sharing is None:
                await self._turn()
            else:
                async with self.sharing.turn(lambda: self.stopping.cancel(LOST_LOCK)) as fence:
                    await self._log_lost_stop()
                    if not fence.lost:
                        await self._turn()
            await self.holding.aafter_turn()
            self.changed()

    async def _turn(self) -> None:
        self.turning = True
        self.changed()
        self._opened = False
        self._taken = []
        stopping = self.stopping
        ended: TurnEnded | None = None
        try:
            try:
                with anyio.CancelScope() as scope:
                    stopping.scope = scope
                    ended = await self._open_turn()
            except Exception as error:  # the log failed, or refused a turn that lost its lock
                ended = TurnEnded("error", explain(error))
            if stopping.cancelled_by == LOST_LOCK and (ended is None or ended.reason == "error"):
                ended = await self._lost_turn()
            elif ended is None:  # cancelled
                if not self._opened:  # still settling: what the user said is kept all the same
                    await self.holding.alog_all(self.held.take())
                ended = TurnEnded("cancelled")
        except Exception as error:  # the log failed (a full disk): say so, keep the session
            ended = TurnEnded("error", explain(error))
        finally:
            stopping.scope = None
            stopping.cancelled_by = None
            self.turning = False
            self._checkpoint_views()
        self.calls.emit(ended)

    def take_held(self) -> list[Held]:
        """The held messages, taken by the running turn (which keeps note of them)."""
        taken = self.held.take()
        self._taken += taken
        return taken

    async def _lost_turn(self) -> TurnEnded:
        """A turn stopped by its lost lock (a shared chat): what it took is held again, to be
        answered once this machine holds the turn, and its stop is logged then."""
        assert self.sharing is not None
        taken, self._taken = self._taken, []
        try:  # the log says which of them it logged
            taken = await anyio.to_thread.run_sync(self.sharing.again, taken)
        except StoreError as error:
            self.calls.outbox.warn(f"memory: {error}")
        self.held.put_back(taken)
        if self._opened:
            self._lost_stop = self._turn_no
        self.calls.outbox.warn(
            f"memory: {LOST_LOCK}: the turn stopped, and runs again once this machine holds it"
        )
        return TurnEnded("cancelled")

    async def _log_lost_stop(self) -> None:
        """The stop of a turn that lost its lock, now that this machine holds the turn again
        (the lost turn may have logged it: its key keeps it to once)."""
        turn, self._lost_stop = self._lost_stop, None
        if turn is None:
            return
        try:
            await self.log.aappend("echo", f"turn stopped: {LOST_LOCK}", key=f"turn-{turn}-stop")
        except StoreError:
            self._lost_stop = turn  # lost again, or the database is down: at the next turn

    def _checkpoint_views(self) -> None:
        """After a turn, off its hot path: view.json if a checkpoint is due by time."""
        # A chat that cannot save says so at its next change; the next open folds forward.
        with suppress(StoreError):
            self.chat.tick()

    async def _open_turn(self) -> TurnEnded:
        """The settle wait (or catching up), the view, the message logged, then the loop (SPEC
        §6.1). Messages held during the wait join the opening, and the view is fitted to the
        room they leave."""
        calls, log = self.calls, self.turn_log
        await calls.parts.mcp.started()  # their tools from the first turn: each start is bounded
        sent_from = [held.workdir for held in self.held if held.workdir is not None]
        if sent_from:  # the tools work where the client that sent the message does
            calls.workdir = sent_from[-1]
        # fixed here: what joins the opening or the turn later cannot switch the model mid-turn
        asked = [held.model for held in self.held if held.model is not None]
        model = asked[-1] if asked else None
        loop = calls.loop(log, calls.context(), master=True, model=model, take_held=self.take_held)

        def room() -> int:
            waiting = list(self.held)
            return loop.view_room(calls.opening(waiting), images_of(waiting))

        fitted = await calls.view_wait.ready(calls.emit, room)
        held = self.take_held()
        self._opened = True
        if not fitted.fits:
            return await self._unanswerable(held)
        await self.chat.aread_texts(fitted.lines)  # a chat in a database reads them ahead
        view = calls.render(fitted)
        ids = await self.holding.alog_all(held)
        calls.emit(TurnStarted(ids))
        turn = self._turn_no = turn_id(held, ids, self.chat.t)  # ids[0], but for a retried one
        calls.checkpoint = self.checkpoints.turn(turn)
        loop.context = replace(loop.context, checkpoint=calls.checkpoint)
        ending = await loop.run(view, fitted.recent + calls.opening(held), turn, images_of(held))
        # its messages are logged before it ends (one refused as stale cancels it meanwhile)
        await log.flushed()
        return ending.event

    async def _unanswerable(self, held: list[Held]) -> TurnEnded:
        """A message too long for the model's window even beside the coarsest view: no turn
        can answer it. It was accepted, so it is logged all the same (SPEC §1.3: what a client
        was told is accepted is kept), followed by the turn's stop saying why it got no reply;
        a model with a larger window can answer it by a retry."""
        window = self.calls.limits.context_budget
        what = "this message does not" if len(held) <= 1 else "these messages do not"
        why = (
            f"{what} fit the model's context window ({window:,} tokens) beside even the "
            "shortest view of the chat, so no reply could be made: shorten it, or choose a "
            "model with a larger window ([turn] context_window) and retry"
        )
        ids = await self.holding.alog_all(held)
        turn = turn_id(held, ids, self.chat.t)
        await self.log.aappend("echo", f"turn stopped: {why}", key=f"turn-{turn}-stop")
        return TurnEnded("context_full", why)
