"""`ChatView`: what the memory's view holds, how it fits a turn, and what is left to build."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from evertalk.chat_parts.reading import ChatReading, format_date
from evertalk.memory import Node
from evertalk.memory.coarse import Fitted, fit, rendered_size, shown_size, summaries_to_go
from evertalk.memory.core import CatchUp
from evertalk.memory.tree import BUILT, CUT, FREE, UNBUILT


@dataclass(frozen=True)
class Status:
    """What `evertalk memory status` shows of the chat."""

    path: Path
    messages: int
    last_date: str | None
    view_lines: int
    view_bytes: int
    shrinking: bool
    cview_lines: int
    cview_bytes: int
    cshrinking: bool
    built: int
    free: int
    cut: int
    unbuilt: int
    ready_leaves: int
    ready_merges: int


class ChatView(ChatReading):
    """The core's view and queues, as the turns and the compactors ask for them."""

    @property
    def view_size(self) -> int:
        """The view's size in bytes, as the core counts it."""
        return self.core.view.size

    def view_nodes(self) -> list[Node]:
        """The view's nodes, oldest first."""
        return list(self.core.view.nodes())

    @property
    def view_ceiling(self) -> int:
        """The most bytes the view may hold before it merges (the budget's ceiling)."""
        return self.core.budget.ceiling

    def is_built(self, node: Node) -> bool:
        """Whether `node` has its summary (built or cut)."""
        return self.core.tree.is_built(node)

    def summaries_to_go(self, room: int) -> int:
        """About how many summaries are still to be built before the view fits `room` bytes."""
        core = self.core
        return summaries_to_go(core.view, core.t, core.tree, room)

    def fit_view(self, room: int, keep: int = 0) -> Fitted:
        """The view as a turn may send it in `room` bytes (`memory.coarse.fit`); `keep`: the
        coarse end of the copy sent last."""
        core = self.core
        return fit(core.view, core.t, core.tree, room, core.budget, keep)

    def sent_size(self, lines: Iterable[Node]) -> int:
        """The bytes these lines take rendered, as the tree stands now."""
        return rendered_size(lines, shown_size(self.core.tree))

    def unbuilt_count(self) -> int:
        """How many nodes of the tree wait for a summary."""
        return self.core.tree.unbuilt_count()

    def ready_leaves(self) -> list[int]:
        """The leaves whose summaries may start now (SPEC §4.2's queue)."""
        return self.core.queues.ready_leaves(self.core.tree)

    def batch_parents(self) -> list[Node]:
        """The parents a batch of built leaves makes ready to merge."""
        return self.core.batch_parents()

    def first_merge(self, skip: set[Node]) -> Node | None:
        """The oldest merge that may start, other than those in `skip`."""
        return self.core.queues.first_merge(self.core.tree, skip)

    def may_build(self, node: Node) -> bool:
        """Whether nothing stops `node` from being built now."""
        return self.core.pending_error(node) is None

    def context_of(self, node: Node) -> list[Node]:
        """The lines a compaction of `node` may show the model as what came before it."""
        return self.core.context(node)

    def builds_to_go(self) -> int:
        """The summaries that will need a model call: every unbuilt leaf and every merge whose
        halves are built."""
        return self.core.tree.unbuilt_count(0) + self.core.queues.merge_count()

    def catch_up(self) -> CatchUp:
        """How far the memory is behind the log (SPEC §3.7)."""
        return self.core.catch_up()

    def status(self) -> Status:
        core, flags = self.core, self.core.tree.flags
        counts = [sum(row.count(flag) for row in flags) for flag in (BUILT, FREE, CUT, UNBUILT)]
        last = self.record(core.t - 1).date if core.t else None
        return Status(
            path=self.store.path,
            messages=core.t,
            last_date=format_date(last) if last else None,
            view_lines=len(core.view),
            view_bytes=core.view.size,
            shrinking=core.view.shrinking,
            cview_lines=len(core.cview),
            cview_bytes=core.cview.size,
            cshrinking=core.cview.shrinking,
            built=counts[0],
            free=counts[1],
            cut=counts[2],
            unbuilt=counts[3],
            ready_leaves=len(core.queues.ready_leaves(core.tree)),
            ready_merges=core.queues.merge_count(),
        )
