"""`TurnFence`: a turn's hold on the chat, which its appends carry (see shared_chat.py)."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass

from evertalk.pgstore.errors import StaleTurn


@dataclass
class TurnFence:
    """A turn's hold on the chat: the epoch its lock was taken at, which its appends carry.
    `lose` says the lock is lost (its watcher saw it, or the database refused an append):
    `on_lost` is called once, on the event loop, as it cancels the turn: a refusal comes back
    there from the database's thread (`told`). Once the turn is over (`active` False) it
    fences nothing."""

    epoch: int
    on_lost: Callable[[], None]
    lost: bool = False
    active: bool = True

    def lose(self) -> None:
        if not self.lost:
            self.lost = True
            self.on_lost()


TURN: ContextVar[TurnFence | None] = ContextVar("evertalk_turn", default=None)
"""The turn the running task logs for, if any: appends made outside a turn carry no epoch."""


@contextmanager
def told(fence: TurnFence | None) -> Iterator[None]:
    """A refusal of a stale turn's append tells the turn (on the event loop, where it runs)."""
    try:
        yield
    except StaleTurn:
        if fence is not None:
            fence.lose()
        raise
