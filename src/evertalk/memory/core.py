"""The memory core: events in (append, build, fail), state out (views, sizes, flags, ready work).

It is deterministic given its sequence of events, and does no I/O: the nodes it builds by
itself (free and cut nodes) are returned to the caller, which makes them durable.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from evertalk.memory.budget import Budget
from evertalk.memory.context import compaction_context
from evertalk.memory.nodes import Node, exists, node_name
from evertalk.memory.order import BuiltNodes, due_key, merge_down
from evertalk.memory.queues import Queues
from evertalk.memory.steps import fit_cview, merge_pairs, step_views
from evertalk.memory.text import leaf_input
from evertalk.memory.tree import BUILT, CUT, FREE, UNBUILT, Built, Tree
from evertalk.memory.view import View, coarsens, tiles

FAILURES_BEFORE_CUT = 3  # the third failure builds the node from its cut input (SPEC §2.5)

BEHIND_SUMMARIES = 64
"""From this many summaries to go, the chat is behind (see `CatchUp`): eight rounds of the
compactor's eight calls, more than a turn's settle wait sees through."""


class CoreError(ValueError):
    """An event the core refuses; the message says why, in one line."""


@dataclass(frozen=True)
class CatchUp:
    """How far the memory is behind: what `memory status` and `memory compact` say, and what
    the app's status bar may show.

    `to_go`: the summaries still to be built, every node not built yet. It is exactly what
    `memory compact` builds and what the compactor has left; it errs high by the nodes that will
    turn out free and cost no call. (A turn that waits for its view to fit counts only the
    nodes that view needs: `memory.coarse.summaries_to_go`.)

    `view_after_batch`: the view's size once its batch goes on with the nodes built now, as the
    next message (less its own line) or `resume_batch` would leave it; the view's size when no
    batch waits.

    `behind`: that size is still over the view's ceiling, or `to_go` is at least
    BEHIND_SUMMARIES. A compactor that keeps up has a handful of nodes to go, and its batches
    reach the floor.
    """

    to_go: int
    view_after_batch: int
    behind: bool


@dataclass(frozen=True)
class SavedViews:
    """What view.json holds (SPEC §3.6); `cview` None means "fit it from the view"."""

    t: int
    view: list[Node]
    cview: list[Node] | None
    shrinking: bool
    cshrinking: bool
    budget: tuple[int, int, int, int] | None = None
    """The sizes the views were shaped by (`Budget.sizes`); None: not recorded (a view.json
    from before they were), taken as the current ones."""


class MemoryCore:
    def __init__(self, budget: Budget | None = None) -> None:
        self.budget = budget or Budget()
        self.tree = Tree()
        self.view = View()
        self.cview = View()
        self.queues = Queues(self.budget.window)
        self.failures: dict[Node, int] = {}
        self.merged = False  # whether the chat view merged at the latest message

    # -- state --------------------------------------------------------------------------

    @property
    def t(self) -> int:
        return self.tree.t

    def ready(self) -> list[Node]:
        """Every node that needs a model call and may start now, sorted by (l, i)."""
        leaves: list[Node] = [(0, i) for i in self.queues.ready_leaves(self.tree)]
        return sorted(leaves + self.queues.ready_merges(self.tree))

    def batch_parents(self) -> list[Node]:
        """The merges an unfinished batch waits for, most due first: the view's while it is
        shrinking, then the cview's while it is (each parent once). Each may start now (both
        halves built). While the compactor lags, these go before new leaves (SPEC §4.1), or
        the batch would merge the newest pairs, whose parents the usual order builds first."""
        t, budget, tree = self.t, self.budget, self.tree
        found: list[Node] = []
        if self.view.shrinking:
            found = waiting_parents(self.view, t, tree, lambda v: v.size > budget.floor)
        if self.cview.shrinking:
            cfloor = budget.cfloor
            more = waiting_parents(self.cview, t, tree, lambda v: v.size > cfloor)
            listed = set(found)
            found += [node for node in more if node not in listed]
        return found

    def saved(self) -> SavedViews:
        return SavedViews(
            self.t,
            self.view.nodes(),
            self.cview.nodes(),
            self.view.shrinking,
            self.cview.shrinking,
            self.budget.sizes(),
        )

    def context(self, node: Node) -> list[Node]:
        """A compaction's context (SPEC §3.7): cview lines that end at or before the node's end
        (for a leaf, before its message), oldest first, up to the first unbuilt line; of those,
        the newest that add up to at most the cview's ceiling (a chat that is behind has
        hundreds of kilobytes of them)."""
        return compaction_context(self.cview, self.tree, node, self.budget.cceiling)

    def catch_up(self) -> CatchUp:
        """How far the memory is behind (see `CatchUp`). A C-speed count of the tree's flags and,
        while a batch waits, one run of it on a copy of the view: never a walk of the tree."""
        to_go = self.tree.unbuilt_count()
        view, budget = self.view, self.budget
        size = view.size
        if view.shrinking or size > budget.ceiling:
            scratch = view.copy()
            floor = budget.floor
            merge_down(scratch, self.t, self.tree, lambda v: v.size > floor)
            size = scratch.size
        return CatchUp(to_go, size, size > budget.ceiling or to_go >= BEHIND_SUMMARIES)

    # -- events -------------------------------------------------------------------------

    def append(self, kind: str, text: str) -> list[Built]:
        """A message was logged. Returns the free nodes it built (to be made durable)."""
        self.tree.add_message(leaf_input(kind, text))
        t = self.t - 1
        built = self._arrive((0, t))
        self._step_views(t)
        return built

    def build(self, node: Node, text: str) -> list[Built]:
        """The compactor's line for a node. Returns the free parents this completes."""
        self._check_pending(node)
        self._mark(node, text, BUILT)
        return self._after_build(node)

    def fail(self, node: Node) -> list[Built]:
        """One failed compaction; the third builds the cut node (returned with its parents)."""
        self._check_pending(node)
        count = self.failures.get(node, 0) + 1
        self.failures[node] = count
        if count < FAILURES_BEFORE_CUT:
            return []
        return self.cut(node)

    def cut(self, node: Node) -> list[Built]:
        """Build a node from its cut input at once (SPEC §2.5), as a third failure does: its
        input cannot be sent (it does not fit the compactor model's window), and no retry would
        make it fit. Returns it and the free parents it completes."""
        self._check_pending(node)
        built = Built(node[0], node[1], self.tree.cut_text(node), CUT)
        self._mark(node, built.text, CUT)
        return [built, *self._after_build(node)]

    def resume_batch(self) -> bool:
        """A batch that waits for parents goes on now, with the nodes built now, with no
        message: the batch steps of SPEC §3.4 and §3.5 for each view whose flag is set, the
        message's own line left out. Returns whether the saved views changed (the owner then
        saves view.json).

        For a chat that no message will reach soon: `memory compact`, once it has built
        everything, so that it ends with the view at or under its ceiling rather than waiting
        for the next message. Builds alone still never change a view (law 2): this is an event
        of its own, and the views it leaves are saved and reopen as they are."""
        before = self.saved()
        view = self.view
        merged = False
        if view.shrinking:
            floor = self.budget.floor
            merged = merge_pairs(view, self.t, self.tree, lambda v: v.size > floor) > 0
            view.shrinking = view.size > floor
        if merged:
            self.cview = view.copy()  # as at a message whose batch merged (SPEC §3.5)
        if merged or self.cview.shrinking:
            self._fit_cview(self.t)
        return self.saved() != before

    def pending_error(self, node: Node) -> str | None:
        """Why a node may not be built or failed now, or None when it may."""
        level, index = node
        built = self.tree.built_at
        if not exists(node, self.t):
            return f"node {level},{index} does not exist yet"
        if built(level, index):
            return f"node {node_name(node)} is already built"
        if level and not (built(level - 1, 2 * index) and built(level - 1, 2 * index + 1)):
            return f"node {node_name(node)} has an unbuilt half"
        return None

    # -- rules --------------------------------------------------------------------------

    def _check_pending(self, node: Node) -> None:
        error = self.pending_error(node)
        if error:
            raise CoreError(error)

    def _arrive(self, node: Node) -> list[Built]:
        """A node's sources are built: build it free (and so on upward), or queue it."""
        built: list[Built] = []
        while True:
            text = self.tree.free_text(node)
            if text is None:
                if node[0]:
                    self.queues.add_merge(node)
                else:
                    self.queues.add_leaf(node[1])
                return built
            self._mark(node, text, FREE)
            built.append(Built(node[0], node[1], text, FREE))
            self._resize_lines(node)
            up = self._complete_parent(node)
            if up is None:
                return built
            node = up

    def _after_build(self, node: Node) -> list[Built]:
        self.failures.pop(node, None)
        if node[0]:
            self.queues.done(node)
        self._resize_lines(node)
        up = self._complete_parent(node)
        return [] if up is None else self._arrive(up)

    def _complete_parent(self, node: Node) -> Node | None:
        """The parent, if this build completed both its halves and it is still to be built.

        The parent may be built already: when a child's record was lost from the tree file but
        the parent's survived, the child is built again and the parent stays as it is (SPEC §2.4).
        """
        level, index = node
        tree = self.tree
        if not tree.built_at(level, index ^ 1) or tree.built_at(level + 1, index >> 1):
            return None
        return (level + 1, index >> 1)

    def _resize_lines(self, node: Node) -> None:
        level, index = node
        if level == 0:
            size = self.tree.sizes[0][index]
            self.view.resize_leaf(index, size)
            self.cview.resize_leaf(index, size)

    def _step_views(self, t: int) -> None:
        """The sawtooth (SPEC §3.4), then the compaction view (SPEC §3.5), at message t."""
        line = self.tree.line_size((0, t))
        step = step_views(self.view, self.cview, t, line, self.budget, self.tree)
        self.cview, self.merged = step.cview, step.merged

    def _fit_cview(self, count: int) -> None:
        """fit(cview) of SPEC §3.5 with `count` messages in the chat."""
        fit_cview(self.cview, count, self.budget, self.tree)

    def _mark(self, node: Node, text: str, flag: int) -> None:
        """Mark a node built, and tell the views whose batch waits for one."""
        self.tree.mark_built(node, text, flag)
        for view in (self.view, self.cview):
            if view.stuck is not None:
                view.stuck.built.append(node)

    # -- restoring ----------------------------------------------------------------------

    @classmethod
    def resume(
        cls, tree: Tree, saved: SavedViews | None, budget: Budget | None = None
    ) -> tuple[MemoryCore, list[Built], str | None]:
        """Open a chat from its tree (texts supplied, see Tree.wanted) and its saved views.

        Returns the core, the free nodes it had to build (a crash lost them), and a warning
        when the saved views were missing or unreadable and had to be folded from message 0.
        """
        core = cls(budget)
        core.tree = tree
        built = core._requeue()
        if saved is None:
            problem = "view.json is missing" if tree.t else None
        else:
            problem = core._unreadable(saved)
        if saved is None or problem:
            start = 0
        else:
            core._load(saved)
            start = saved.t
        for t in range(start, tree.t):
            core._step_views(t)
        warning = f"{problem}: folded the views again from message 0" if problem else None
        if saved is not None and saved.budget is not None and not problem:
            warning = core._refit(saved.budget)
        return core, built, warning

    def rebudget(self, sizes: tuple[int, int, int, int]) -> str | None:
        """The views' budget becomes `sizes` (`Budget.sizes`), now: an event of its own (a
        shared chat's machines all take it at the same place in the chat's stream), refitted
        as at an open with another budget. The line that says so, or None when it is the same."""
        old = self.budget.sizes()
        self.budget = Budget(*sizes, window=self.budget.window)
        return self._refit(old)

    def _refit(self, sizes: tuple[int, int, int, int]) -> str | None:
        """The views were shaped by other budgets (another model, another window): a batch
        starts for each view over its new ceiling, and one under its new floor stops, then the
        batches go on with the nodes built now (as `resume_batch`). A planned change, said once:
        the views are kept, not folded again."""
        if sizes == self.budget.sizes():
            return None
        budget = self.budget
        for view, ceiling, floor in (
            (self.view, budget.ceiling, budget.floor),
            (self.cview, budget.cceiling, budget.cfloor),
        ):
            view.shrinking = view.size > (floor if view.shrinking else ceiling)
        self.resume_batch()
        old = f"{sizes[0]:,}/{sizes[1]:,} bytes"
        new = f"{budget.ceiling:,}/{budget.floor:,} bytes"
        return f"the view's budget changed from {old} to {new} (ceiling/floor): views refitted"

    def _requeue(self) -> list[Built]:
        """Rebuild the ready queues in one pass, building any free node a crash left out."""
        tree, built = self.tree, []
        for level in range(len(tree.flags)):
            for index in list(tree.unbuilt(level)):
                node = (level, index)
                if tree.is_built(node):
                    continue  # built free while this pass ran
                if level == 0 or self.pending_error(node) is None:
                    built += self._arrive(node)
        return built

    def _unreadable(self, saved: SavedViews) -> str | None:
        if saved.t > self.t:
            return f"view.json covers {saved.t} messages but the log has {self.t}"
        if not tiles(saved.view, saved.t):
            return "view.json's view does not tile the chat"
        if saved.cview is not None:
            if not tiles(saved.cview, saved.t):
                return "view.json's compaction view does not tile the chat"
            if not coarsens(saved.cview, saved.view):
                return "view.json's compaction view is not a coarsening of its view"
        for line in [*saved.view, *(saved.cview or [])]:
            if line[0] and not self.tree.is_built(line):
                return f"view.json names the unbuilt node {node_name(line)}"
        return None

    def _load(self, saved: SavedViews) -> None:
        size = self.tree.line_size
        self.view = View.of(saved.view, size)
        self.view.shrinking = saved.shrinking
        if saved.cview is None:
            self.cview = self.view.copy()
            self._fit_cview(saved.t)
        else:
            self.cview = View.of(saved.cview, size)
            self.cview.shrinking = saved.cshrinking


def waiting_parents(
    view: View, t: int, nodes: BuiltNodes, over: Callable[[View], bool]
) -> list[Node]:
    """The parents an unfinished batch waits for, most due first (the oldest on ties).

    The batch is run on a copy, with the nodes built now (as the next message would run it,
    less that message's own line). If the copy stays `over`, the merges it lacks are the
    parents of its sibling pairs whose halves are both built, which a compaction may start
    now. Building those first makes the batch merge its most due pairs, not the newest pairs
    whose parents happen to be built. The walk covers the view's lines, never the tree.
    """
    scratch = view.copy()
    merge_down(scratch, t, nodes, over)
    if not over(scratch):
        return []
    lines, built = scratch.lines, nodes.built_at
    ranked: list[tuple[int, int, Node]] = []
    for start, level in lines.items():
        index = start >> level
        if index & 1 or lines.get(start + (1 << level)) != level:
            continue
        # merge_down left only pairs whose parent is unbuilt; it may start once both halves
        # are built (a leaf line may not be yet)
        if built(level, index) and built(level, index + 1):
            ranked.append((-due_key(t, level, index), start, (level + 1, index >> 1)))
    ranked.sort()
    return [parent for _, _, parent in ranked]


__all__ = [
    "BEHIND_SUMMARIES",
    "BUILT",
    "CUT",
    "FREE",
    "UNBUILT",
    "Built",
    "CatchUp",
    "MemoryCore",
    "SavedViews",
]
