"""`OthersLeases`: the nodes other machines hold a live lease on, as this machine last read
them (a compaction runs only under a lease, see shared_chat.py)."""

from __future__ import annotations

import time
from collections.abc import Iterable, Set
from concurrent.futures import Future

from evertalk.memory import Node
from evertalk.pgstore.leases import Lease
from evertalk.pgstore.pgchat import PgChat
from evertalk.pgstore.storage import PgStorage
from evertalk.pgstore.worker import on_event_loop

LEASES_READ_EVERY = 2.0
"""Seconds the other machines' leases are taken as read: a claim settles who builds anyway."""


class OthersLeases:
    """Read at most every LEASES_READ_EVERY seconds; on an event loop, in the database's
    thread, and taken when the read comes back."""

    def __init__(self, shared: PgStorage, machine: str) -> None:
        self.shared = shared
        self.machine = machine
        self.leased: Set[Node] = frozenset()
        self._read_at = -float("inf")
        self._job: Future[list[Lease]] | None = None

    def refused(self, node: Node) -> None:
        """A claim of `node` was refused: another's, or the chat's leases are all out; it is
        not tried again at once."""
        self.leased = self.leased | {node}

    def now(self) -> Set[Node]:
        """The nodes leased elsewhere, as read at most a moment ago (on an event loop, as last
        read: the next read is made in the database's thread)."""
        now = time.monotonic()
        if now - self._read_at >= LEASES_READ_EVERY:
            self._read_at = now
            if not on_event_loop():
                self.leased = self._others(self.shared.live_leases())
            elif self._job is None or self._job.done():
                self._job = self.shared.submit(PgChat.live_leases)
                self._job.add_done_callback(self._came)
        return self.leased

    def _came(self, job: Future[list[Lease]]) -> None:
        if not job.cancelled() and job.exception() is None:
            self.leased = self._others(job.result())  # one assignment: whole or not at all

    def _others(self, leases: Iterable[Lease]) -> Set[Node]:
        return frozenset((lease.l, lease.i) for lease in leases if lease.machine != self.machine)
