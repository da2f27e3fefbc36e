"""The wait before a turn renders its view (SPEC §6.1), and catching up when the chat is behind.

Usually the view is within its ceiling and the turn model's window, and this is the settle wait:
at most `memory.settle_timeout` seconds for the view's unbuilt lines, with `Settling(n)`
meanwhile.

A chat that is behind (an import, a long time offline, a lost tree) can have a view far over
its ceiling: free lines cannot merge until their parents are built, and the core's view merges
only at a message. The turn then fits the view at render time (`memory/coarse.py`: the batch
rule with the nodes built now, within the ceiling and the window), and waits for the summaries
that make it fit, saying how it goes: `CatchingUp(to_go, eta, view_tokens)`. Meanwhile the user
can send messages (they are held, and join the turn's opening) or cancel the turn.

The bound. Catching up ends after `catch_up_timeout` seconds (5 minutes by default), and earlier
once it cannot succeed in that time: when the pace of the last minute says the summaries left
take longer than the time left, or when nothing was built for a whole minute (the compactor
fails, is paused, or hangs). A fixed timeout alone would make every turn of a chat hours behind
wait the full 5 minutes for nothing; the pace lets such a turn go on after about ten seconds. The
turn then goes on with its oldest messages shown as coarse lines, and a `memory:` warning says
so: a turn never fails because the chat is behind.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field, replace

import anyio

from evertalk.agent.newest import BUDGET as NEWEST_BUDGET
from evertalk.agent.newest import newest_block, runs, unsummarized
from evertalk.chat import Chat
from evertalk.compactor.service import Compactor
from evertalk.memory import Node
from evertalk.memory.coarse import Fitted, collapsed
from evertalk.protocol.events import (
    AgentEvent,
    CatchingUp,
    MemoryWarning,
    Settling,
    about,
)
from evertalk.providers.base import BYTES_PER_TOKEN

CATCH_UP_TIMEOUT = 300.0
"""Seconds a turn waits at most for a chat that is behind to catch up (see above)."""

SETTLE_POLL = 0.05
"""Seconds between two looks at the view while a turn waits for its lines to be built."""

CATCH_UP_POLL = 0.25
"""The same while catching up: each look fits the whole view, and the wait is long anyway."""

PACE_WINDOW = 60.0
"""The pace of the summaries is measured over this many seconds, the latest ones; a wait in
which nothing was built for this long gives up."""

PACE_AFTER = 10.0
"""No pace is given before the wait has lasted this long: the first calls all start together
and land together, and an estimate from them alone would be far off."""

SHOW_EVERY = 1.0
"""`CatchingUp` is sent at most this often (seconds)."""

Emit = Callable[[AgentEvent], None]
Room = Callable[[], int]
"""The bytes of rendered view the turn's first call has room for, now (held messages join the
opening, so the room can shrink while the turn waits)."""
ToGo = Callable[[int], int]
"""About how many summaries are still to be built before a view fits this many bytes."""
Tokens = Callable[[int], int]
"""About how many tokens this many bytes of request take."""
Figures = tuple[int, float | None, int]
"""What `CatchingUp` says: summaries to go, the time that takes, the tokens of the view sent."""


@dataclass
class Pace:
    """Summaries built per second over the last minute, from samples of a build count."""

    started: float
    samples: deque[tuple[float, int]] = field(default_factory=deque)

    def add(self, now: float, built: int) -> None:
        self.samples.append((now, built))
        # keep one sample at or before the window's start, to measure the whole window
        while len(self.samples) > 1 and self.samples[1][0] <= now - PACE_WINDOW:
            self.samples.popleft()

    def eta(self, now: float, to_go: int) -> float | None:
        """Seconds until `to_go` more are built at the recent pace; None while unknown."""
        if now - self.started < PACE_AFTER or not self.samples:
            return None
        (then, before), (_, latest) = self.samples[0], self.samples[-1]
        if latest <= before:
            return None
        return to_go * (now - then) / (latest - before)

    def stalled(self, now: float) -> bool:
        """Nothing was built for a whole window."""
        if not self.samples:
            return False
        (then, before), (_, latest) = self.samples[0], self.samples[-1]
        return now - then >= PACE_WINDOW and latest == before


@dataclass
class _Shown:
    """What the wait last told the user, so that it says only what changed, and not too often."""

    settling: int = -1
    catching_up: Figures | None = None  # the figures last sent
    at: float = -math.inf  # … and when
    figures: Figures | None = None  # the latest figures
    counted_at: float = -math.inf  # … and when they were counted


class ViewWait:
    """Waits until the view can be rendered for a turn or a subagent; one per session."""

    def __init__(
        self,
        chat: Chat,
        compactor: Compactor,
        *,
        settle_timeout: float,
        catch_up_timeout: float,
        to_go: ToGo,
        tokens: Tokens | None = None,
    ) -> None:
        self.chat = chat
        self.compactor = compactor
        self.settle_timeout = settle_timeout
        self.catch_up_timeout = catch_up_timeout
        self.to_go = to_go
        self.tokens = tokens or (lambda size: math.ceil(size / BYTES_PER_TOKEN))
        self._keep = 0  # the coarse end of the last view a turn sent (`memory/coarse.py`)
        self._room: int | None = None  # the bound of the last fit; None before the first
        self._now = False  # the person asked the turn to start without catching up

    def start_now(self) -> None:
        """The turn waiting for a chat that is behind goes on at once, or the next one does
        not wait for it (a message sent with `now`): with what is built, and SPEC's rules."""
        self._now = True

    async def ready(self, emit: Emit, room: Room) -> Fitted:
        """The lines to render: the view fitted to the room, once its lines are built, or the
        settle wait or catching up is over (see above). Without waiting when the view fits and
        is built, or when not even the coarsest view would fit (an opening message too long
        for the window: no summary can help, and the turn's own check says so)."""
        fitted, fits = self._fit(room())
        if (fitted.coarse_end == 0 and not self._unbuilt(fitted)) or not fits:
            self._now = False
            return self._used(fitted)
        with self.compactor.waiting():  # failed nodes are retried on a timer meanwhile (§4.5)
            fitted = self._used(await self._wait(emit, room))
        return await self._behind(fitted, room)

    async def _behind(self, fitted: Fitted, room: Room) -> Fitted:
        """While the chat is behind, the fitted view with its runs of unbuilt leaves shown as
        a few aligned ranges, and the newest unsummarized messages to go after it, in what
        room the view leaves (SPEC §6.1). A chat that merely waited for its last lines is not
        behind: its placeholders stay."""
        chat = self.chat
        if not fitted.fits or (fitted.coarse_end == 0 and not chat.catch_up().behind):
            return fitted
        ids = unsummarized(fitted.lines, chat.is_built)
        lines = collapsed(fitted.lines, chat.is_built)
        budget = min(NEWEST_BUDGET, room() - chat.sent_size(lines))
        if not ids or budget <= 0:
            return replace(fitted, lines=lines)
        for start, stop in runs(ids):
            await chat.aread_records(start, stop)
        records = (chat.record(i) for i in ids)
        return replace(fitted, lines=lines, recent=newest_block(records, budget))

    def _used(self, fitted: Fitted) -> Fitted:
        """What a turn sends: its coarse stretch is kept at the next turns while it fits."""
        if fitted.fits:
            self._keep = fitted.coarse_end
        return fitted

    async def _wait(self, emit: Emit, room: Room) -> Fitted:
        start = anyio.current_time()
        settle_by = start + self.settle_timeout
        give_up_at = start + self.catch_up_timeout
        pace = Pace(start)
        shown = _Shown()
        while True:
            now = anyio.current_time()
            space = room()
            fitted, fits = self._fit(space)
            if not fits:
                return fitted  # a held message made the opening too long for any view
            if fitted.coarse_end == 0:
                unbuilt = self._unbuilt(fitted)
                if not unbuilt or now >= settle_by:
                    return fitted
                self._settling(emit, shown, unbuilt)
                delay = min(SETTLE_POLL, settle_by - now)
            elif self._now:
                self._now = False
                said = "you asked to start without catching up"
                emit(MemoryWarning(_going_on(said, fitted.coarse_end)))
                return fitted
            else:
                pace.add(now, self.compactor.built)
                if shown.figures is None or now - shown.counted_at >= SHOW_EVERY:
                    # a walk of the view: once a second is enough
                    to_go = self.summaries_to_go(room)
                    sent = self.chat.sent_size(fitted.lines)
                    shown.figures = (to_go, pace.eta(now, to_go), self.tokens(sent))
                    shown.counted_at = now
                figures = shown.figures
                why = _hopeless(pace, now, figures[1], give_up_at, self.catch_up_timeout)
                if why is not None:
                    why = f"catching up would take too long ({why})"
                    emit(MemoryWarning(_going_on(why, fitted.coarse_end)))
                    return fitted
                self._catching_up(emit, shown, now, figures)
                delay = min(CATCH_UP_POLL, give_up_at - now)
            await anyio.sleep(delay)

    def summaries_to_go(self, room: Room) -> int:
        """The count `CatchingUp` gives, now, for the bound of the last fit (before any, for
        `room`): the status shows the same figure as a waiting turn, with the same meaning."""
        if self._room is None:
            self._room = min(room(), self.chat.view_ceiling)
        return self.to_go(self._room)

    def _fit(self, room: int) -> tuple[Fitted, bool]:
        """The view fitted to `room`, and whether it fits (not even the coarsest may)."""
        self._room = min(room, self.chat.view_ceiling)
        fitted = self.chat.fit_view(room, self._keep)
        fits = self.chat.sent_size(fitted.lines) <= room
        return (fitted if fits else replace(fitted, fits=False)), fits

    def _unbuilt(self, fitted: Fitted) -> list[Node]:
        is_built = self.chat.is_built
        return [node for node in fitted.lines if not is_built(node)]

    def _settling(self, emit: Emit, shown: _Shown, unbuilt: list[Node]) -> None:
        """Say how many lines are still unbuilt when that changes; they go first in the
        compactor's queue (SPEC §4.1)."""
        if len(unbuilt) != shown.settling:
            shown.settling = len(unbuilt)
            shown.catching_up = shown.figures = None
            emit(Settling(len(unbuilt)))
            self.compactor.prioritize(unbuilt)

    def _catching_up(self, emit: Emit, shown: _Shown, now: float, figures: Figures) -> None:
        """Say how far catching up is: at once, then at most once a second while it changes."""
        first = shown.catching_up is None
        if not first and (now - shown.at < SHOW_EVERY or figures == shown.catching_up):
            return
        if first:
            # nothing goes before the batch's parents, which the compactor puts first while
            # the view is merging: they are what makes the view fit
            self.compactor.prioritize([])
        shown.catching_up, shown.at, shown.settling = figures, now, -1
        emit(CatchingUp(*figures))


def _hopeless(
    pace: Pace, now: float, eta: float | None, give_up_at: float, timeout: float
) -> str | None:
    """Why catching up cannot succeed in time, or None while it may."""
    if now >= give_up_at:
        return f"it took {about(timeout)}"
    if pace.stalled(now):
        return "no summary was built for a minute"
    if eta is not None and now + eta > give_up_at:
        return f"{about(eta)} of summaries to go"
    return None


def _going_on(why: str, end: int) -> str:
    return (
        f"memory: the chat is behind and {why}; this turn sees messages 0–{end - 1} only as "
        "coarse lines, which zoom opens"
    )
