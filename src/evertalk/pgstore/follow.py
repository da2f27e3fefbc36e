"""The order in which a machine folds in the chat's changes: `Follower`, without any I/O.

Every change to the shared state has a sequence number (chats.py), and every machine's service
applies the changes in that order: the other machines' changes below one of its own before it.
What it reads comes in batches that need not be in order: a wake-up may be lost, a batch read
again after a gap holds changes already folded, and a batch may stop short of one that another
reader has seen. `Follower` takes those batches and applies, in order, each change exactly
once, as soon as every change before it is in; what it holds past a gap waits there, and
`missing` names the changes to read again (from `changes_since(follower.seq)`).

The position moves past a change only once the change is applied: an apply that fails (its read
of the database broke off) leaves the follower at that change, still held, so that the next
batch applies it again, and nothing after it is skipped.

The listener that fetches the batches is listen.py; this module neither reads nor waits.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from evertalk.pgstore.chats import Change

T = TypeVar("T")


def _as_is(change: Change) -> Change:
    return change


class Follower:
    """The changes `machine` has folded in: every one up to `seq`, and none after it.

    `feed` takes changes read from the feed (any machine's, this one's too); `fold_own` takes a
    change this machine has just committed. Both apply the changes that can now be folded, in
    sequence order, and return what each apply returned (by default the change itself); a
    change past a gap is held until the gap is filled.
    """

    def __init__(self, machine: str, seq: int = 0) -> None:
        if seq < 0:
            raise ValueError("a sequence number is never negative")
        self.machine = machine
        self._seq = seq
        self._held: dict[int, Change] = {}

    @property
    def seq(self) -> int:
        """The last sequence number folded: every change up to it is, and none after it."""
        return self._seq

    @property
    def held(self) -> int:
        """How many changes wait past a gap."""
        return len(self._held)

    @property
    def missing(self) -> range | None:
        """The sequence numbers of the first gap, which keep the changes held from being folded
        (read them again with `changes_since(seq)`); None when nothing is held."""
        if not self._held:
            return None
        return range(self._seq + 1, min(self._held))

    def feed(
        self,
        changes: Iterable[Change],
        apply: Callable[[Change], T] = _as_is,  # type: ignore[assignment]
    ) -> list[T]:
        """Take changes as read, in any order, repeated or not, and apply those now in order."""
        for change in changes:
            self._hold(change)
        return self._advance(apply)

    def fold_own(
        self,
        seq: int,
        what: dict[str, Any],
        apply: Callable[[Change], T] = _as_is,  # type: ignore[assignment]
    ) -> list[T]:
        """Take the change this machine committed as `seq`. It is applied after every change
        before it: those not applied yet, then this one, in order; or nothing while some are
        missing. A change already applied (read back from the feed first) is not again."""
        self._hold(Change(seq, self.machine, what))
        return self._advance(apply)

    def _hold(self, change: Change) -> None:
        if change.seq < 1:
            raise ValueError(f"no change has the sequence number {change.seq}")
        if change.seq <= self._seq:
            return  # folded already: a batch read again, or this machine's change read back
        held = self._held.get(change.seq)
        if held is None:
            self._held[change.seq] = change
        elif held.machine != change.machine:
            raise ValueError(
                f"change {change.seq} is said to be made by both {held.machine!r}"
                f" and {change.machine!r}"
            )

    def _advance(self, apply: Callable[[Change], T]) -> list[T]:
        done = []
        while (change := self._held.get(self._seq + 1)) is not None:
            done.append(apply(change))  # raises: the position stays before it, still held
            del self._held[change.seq]
            self._seq = change.seq
        return done
