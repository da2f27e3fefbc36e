"""`SharedLeases`: this machine's claims on the nodes it builds, and the queues without the
nodes other machines build (a compaction runs only under a lease, see shared_chat.py)."""

from __future__ import annotations

from collections.abc import Iterable, Set

from evertalk.memory import Node
from evertalk.pgstore.worker import on_event_loop
from evertalk.shared_chat_parts.state import SharedState


class SharedLeases(SharedState):
    """Claims, renewed while the calls run and released when they fail; the others' leases
    kept out of `ready_leaves`, `batch_parents` and `first_merge`."""

    @property
    def renew_every(self) -> float:
        """Seconds between two renewals of the claims whose calls run: a third of a lease, so
        that two may fail before it lapses."""
        return self.shared.lease_seconds / 3

    def renew(self, nodes: Iterable[Node]) -> None:
        """Claim again the nodes whose calls run here, so that no other machine takes them."""
        for node in nodes:
            self.shared.claim(node[0], node[1])

    async def arenew(self, nodes: Iterable[Node]) -> None:
        wanted, seconds = list(nodes), self.shared.lease_seconds
        await self.shared.call(lambda chat: [chat.claim(n[0], n[1], seconds) for n in wanted])

    def claim(self, node: Node) -> bool:
        return self._claimed(node, self.shared.claim(node[0], node[1]))

    async def aclaim(self, node: Node) -> bool:
        l, i, seconds = node[0], node[1], self.shared.lease_seconds  # noqa: E741
        return self._claimed(node, await self.shared.call(lambda chat: chat.claim(l, i, seconds)))

    def _claimed(self, node: Node, taken: bool) -> bool:
        if not taken:
            self._leases.refused(node)
        return taken

    def release(self, node: Node) -> None:
        """On an event loop, in the database's thread, not waited for: a lease not released
        lapses by itself."""
        l, i = node  # noqa: E741
        if on_event_loop():
            self.shared.submit(lambda chat: chat.release(l, i))
        else:
            self.shared.release(l, i)

    def leased_elsewhere(self) -> Set[Node]:
        """The nodes other machines hold a live lease on, as read at most a moment ago (on an
        event loop, as last read: the next read is made in the database's thread)."""
        return self._leases.now()

    def ready_leaves(self) -> list[int]:
        leased = self.leased_elsewhere()
        return [i for i in super().ready_leaves() if (0, i) not in leased]

    def batch_parents(self) -> list[Node]:
        leased = self.leased_elsewhere()
        return [node for node in super().batch_parents() if node not in leased]

    def first_merge(self, skip: set[Node]) -> Node | None:
        return super().first_merge(skip | set(self.leased_elsewhere()))
