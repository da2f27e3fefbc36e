"""The way of a held message from accepted to logged (SPEC §6.4): held durably while a turn
runs, taken by the next turn (or the running one, between two tool calls), and logged at once
where no turn will take it — a subagent's report at quit, a stop report with no turn running.
The queue keeps the messages (`held_queue.py`); this decides when they are logged."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from evertalk.agent.held_queue import HeldQueue, Quiet
from evertalk.agent.images import ImageStore
from evertalk.agent.retry import Retried
from evertalk.agent.turn import Held
from evertalk.chat import Chat
from evertalk.store.message_log import MessageLog, NewMessage


@dataclass
class Holding:
    """Held messages for one session's turns. `woken` is called whenever a turn may have
    something new to take; `turning` says whether one runs."""

    queue: HeldQueue
    log: MessageLog
    images: ImageStore
    chat: Chat
    woken: Callable[[], None]
    turning: Callable[[], bool]

    def hold(self, held: Held, *, strict: bool = False) -> None:
        """Hold a message for a turn, written to the held file first. `strict`: a message that
        cannot be made durable is refused (StoreError), as a client must not hear `accepted`
        for it; otherwise (a subagent's report) it is held all the same, in memory only."""
        self.queue.add(held, strict=strict)
        self.woken()

    def recover(self) -> None:
        """At open: the messages accepted before the last owner stopped and not logged yet are
        held again, in order, and open the first turn (a stop report alone is logged now)."""
        waiting = self.queue.recover(self.chat.warnings, self.chat.logged)
        if waiting:
            count = f"{waiting} message" + ("s" if waiting > 1 else "")
            self.chat.warnings.append(
                f"{count} accepted before evertalk stopped had not been answered: "
                "answered now, first"
            )
        self.after_turn()

    def after_turn(self) -> None:
        """Stop reports the turn ended without taking are logged now rather than starting a
        turn (held messages of any other kind start the next one, with them); the file keeps
        only what is still unlogged."""
        if self.queue.only_quiet():
            self._log_quietly(self.queue.take())
        self.queue.settle(self.chat.logged)

    async def aafter_turn(self) -> None:
        """`after_turn`, awaited: a chat in a database logs, and looks the held keys up, in its
        own thread."""
        if self.queue.only_quiet():
            await self._alog_quietly(self.queue.take())
        await self.chat.alogged_keys([held.key for held in self.queue if held.key is not None])
        self.queue.settle(self.chat.logged)

    async def alog_all(self, held: list[Held]) -> list[int]:
        """`log_all`, awaited."""
        alog = getattr(self.log, "alog_message", None)
        ids: list[int] = []
        for message in held:
            if isinstance(message, Retried):
                ids += message.ids
                continue
            new = NewMessage(
                message.kind,
                message.text,
                key=message.key,
                agent=message.agent,
                images=self.images.save_all(message.images),
            )
            ids += await alog(new) if alog is not None else self.log.log_message(new)
        return ids

    async def _alog_quietly(self, held: list[Held]) -> None:
        try:
            await self.alog_all(held)
        except Exception:  # as `_log_quietly`
            self.queue.put_back(held)
            self.woken()

    def log_all(self, held: list[Held]) -> list[int]:
        """Log held messages in order; their ids (a retried message was logged already)."""
        ids: list[int] = []
        for message in held:
            if isinstance(message, Retried):  # logged before its turn failed (`retry`)
                ids += message.ids
                continue
            ids += self.log.append(
                message.kind,
                message.text,
                key=message.key,
                agent=message.agent,
                images=self.images.save_all(message.images),
            )
        return ids

    def record_now(self, held: Held) -> None:
        """Log a subagent's message at once, not held for a turn: it was stopped at quit,
        when no turn will come to take it."""
        self.log_all([held])

    def report_stopped(self, held: Held) -> None:
        """The report of a subagent the user stopped. A running turn takes it between two tool
        calls like any report, as the model may be counting on that work; with no turn running
        it is logged at once and starts none: the user chose to end the work, a turn would
        only spend money on it, and the next turn reads it in the view all the same."""
        if self.turning():
            self.hold(Quiet(held.kind, held.text, held.agent))
        else:
            self._log_quietly([held])

    def _log_quietly(self, held: list[Held]) -> None:
        try:
            self.log_all(held)
        except Exception:  # the log failed (a full disk): a turn tries again, and says why
            self.queue.put_back(held)
            self.woken()
