"""Forgetting in the core (SPEC §12): the nodes over the changed messages are dropped, the views
are fixed up in place and keep the laws of §9, and building to completion gives the tree a
chat would have had with the marker texts from the start."""

from __future__ import annotations

from core_history import History
from hypothesis import given, settings
from hypothesis import strategies as st
from test_core_laws import KINDS, message_texts

from budget import examples
from evertalk.memory import Budget, MemoryCore
from evertalk.memory.forget import dropped_nodes, fix_saved, fix_view, staying
from evertalk.memory.nodes import Node
from evertalk.memory.text import cut_utf8, leaf_input
from evertalk.memory.tree import UNBUILT
from evertalk.memory.view import coarsens, tiles

BUDGET = Budget(ceiling=1_000, floor=500, cceiling=700, cfloor=350, window=8)
MARKER = "[forgotten on 2026-12-05]"


def summary(node_input: str) -> str:
    """A deterministic compactor: the same input always gives the same line."""
    return cut_utf8(f"s{len(node_input)}: {node_input[-200:]}".replace("\n", " "), 300)


class Forgetting(History):
    """A history whose nodes are built by `summary`, and whose messages can be forgotten."""

    def summarize(self, node: Node) -> None:
        self.build(node, summary(self.core.tree.input_of(node)))

    def finish(self) -> None:
        while ready := self.core.ready():
            for node in ready:
                self.summarize(node)

    def forget(self, messages: set[int]) -> list[Node]:
        """What the store and a reopen do: drop the nodes, fix the views, resume."""
        tree = self.core.tree
        dropped = dropped_nodes(sorted(messages), [], tree.t, tree.built_at)
        saved = fix_saved(self.core.saved(), staying(tree.built_at, dropped))
        for node in dropped:
            del self.texts[node]
        for i in messages:
            self.inputs[i] = leaf_input(self.inputs[i].split(":", 1)[0], MARKER)
        self.core, built, warning = self.reopen(set(dropped), saved)
        assert warning is None  # the fixed-up views are readable as they are
        self.record(built)
        return dropped


def laws(core: MemoryCore) -> None:
    tree = core.tree
    for view in (core.view, core.cview):
        nodes = view.nodes()
        assert tiles(nodes, core.t)
        assert all(tree.is_built(node) for node in nodes if node[0])
        assert view.size == sum(tree.line_size(node) for node in nodes)
    assert coarsens(core.cview.nodes(), core.view.nodes())


def built_texts(history: History) -> dict[Node, str]:
    tree = history.core.tree
    return {
        (level, index): history.texts[(level, index)]
        for level, row in enumerate(tree.flags)
        for index, flag in enumerate(row)
        if flag != UNBUILT
    }


@settings(max_examples=examples(120), deadline=None)
@given(st.data())
def test_forgetting_then_building_gives_the_tree_of_the_marker_texts(data: st.DataObject) -> None:
    messages = data.draw(
        st.lists(st.tuples(st.sampled_from(KINDS), message_texts()), min_size=1, max_size=24)
    )
    history = Forgetting(BUDGET)
    for kind, text in messages:
        history.append(kind, text)
        for node in history.core.ready():
            if data.draw(st.booleans()):
                history.summarize(node)
    forgotten = data.draw(st.sets(st.integers(0, len(messages) - 1), min_size=1), label="forget")
    history.forget(forgotten)
    for i in forgotten:  # a leaf built again at once is the marker's (free) line
        if history.core.tree.is_built((0, i)):
            assert history.texts[(0, i)] == leaf_input(messages[i][0], MARKER)
    laws(history.core)
    for kind, text in data.draw(st.lists(st.tuples(st.sampled_from(KINDS), message_texts()))):
        history.append(kind, text)
        messages.append((kind, text))
        laws(history.core)
    history.finish()
    laws(history.core)

    fresh = Forgetting(BUDGET)
    for i, (kind, text) in enumerate(messages):
        fresh.append(kind, MARKER if i in forgotten else text)
    fresh.finish()
    assert built_texts(history) == built_texts(fresh)
    assert history.core.tree.flags == fresh.core.tree.flags
    # the core's replay of each chat, folded from message 0 with every node built: the same
    replayed = [MemoryCore.resume(h.core.tree, None, BUDGET)[0].saved() for h in (history, fresh)]
    assert replayed[0] == replayed[1]


def test_a_line_over_a_forgotten_message_splits_into_the_built_nodes_beside_it() -> None:
    built = {(3, 0), (2, 0), (2, 1), (1, 2), (1, 3), (0, 4), (0, 5), (0, 6), (0, 7)}
    stays = staying(lambda level, index: (level, index) in built, [(3, 0), (2, 1), (1, 2), (0, 5)])
    assert fix_view([(3, 0), (0, 8)], stays) == [(2, 0), (0, 4), (0, 5), (1, 3), (0, 8)]
