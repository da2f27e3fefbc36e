"""The order in which a machine folds in the chat's changes: `Follower`, without any I/O.

Every change to the shared state has a sequence number (chats.py), and every machine's service
applies the changes in that order: the other machines' changes below one of its own before it.
What it reads comes in batches that need not be in order: a wake-up may be lost, a batch read
again after a gap holds changes already folded, and a batch may stop short of one that another
reader has seen. `Follower` takes those batches and gives back, in order, each change exactly
once, as soon as every change before it is in; what it holds past a gap waits there, and
`missing` names the changes to read again (from `changes_since(follower.seq)`).

The listener that fetches the batches is listen.py; this module neither reads nor waits.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from evertalk.pgstore.chats import Change


class Follower:
    """The changes `machine` has folded in: every one up to `seq`, and none after it.

    `feed` takes changes read from the feed (any machine's, this one's too); `fold_own` takes a
    change this machine has just committed. Both return the changes that can now be folded, in
    sequence order; a change past a gap is held until the gap is filled.
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

    def feed(self, changes: Iterable[Change]) -> list[Change]:
        """Take changes as read, in any order, repeated or not; those now folded, in order."""
        for change in changes:
            self._hold(change)
        return self._advance()

    def fold_own(self, seq: int, what: dict[str, Any]) -> list[Change]:
        """Take the change this machine committed as `seq`. It is folded after every change
        before it: the result holds those not folded yet, then this one, in order; or nothing
        while some are missing. A change already folded (read back from the feed first) is
        not folded again."""
        self._hold(Change(seq, self.machine, what))
        return self._advance()

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

    def _advance(self) -> list[Change]:
        folded = []
        while (change := self._held.pop(self._seq + 1, None)) is not None:
            folded.append(change)
            self._seq = change.seq
        return folded
