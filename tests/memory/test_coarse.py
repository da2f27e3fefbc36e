"""A view fitted to a turn model's window at render time, for a chat that is behind: merged by
the batch rule with the nodes built now, then, if that is not enough, its oldest lines shown as
the fewest aligned coarse lines (`id+n|[not yet summarized: messages a–b]`). The core's view
never changes."""

from __future__ import annotations

import itertools
from collections.abc import Callable

from hypothesis import given, settings
from hypothesis import strategies as st

from budget import examples
from evertalk.memory import Budget, MemoryCore, Node
from evertalk.memory.coarse import (
    TYPICAL_LINE,
    aligned_cover,
    coarse_text,
    coarsened,
    collapsed,
    fit,
    merged_to_fit,
    render,
    rendered_size,
    shown_size,
    summaries_to_go,
)
from evertalk.memory.text import PLACEHOLDER
from evertalk.memory.view import coarsens, render_line, tiles

ROOMY = 10_000_000  # budgets the core's own views never reach: no batch ever runs
LONG = "x" * 600  # `user: ` + 600 bytes: never a free leaf
FREE = "f" * 400  # a free leaf of 406 bytes; two make no free parent


def behind(messages: int, text: str = FREE) -> MemoryCore:
    """A chat whose views never merged: every message its own line."""
    core = MemoryCore(Budget(ROOMY, ROOMY, ROOMY, ROOMY))
    for _ in range(messages):
        core.append("user", text)
    return core


def texts_of(core: MemoryCore) -> dict[Node, str]:
    """What Chat.text_of would give: the core holds every text these small chats need."""
    return dict(core.tree.texts)


def lines_of(core: MemoryCore) -> Callable[[Node], str | None]:
    """What Chat.line_of would give."""
    texts = texts_of(core)
    return lambda node: None if node not in texts else render_line(node, texts[node])


# -- the cover -----------------------------------------------------------------------------


def test_the_cover_of_a_range_is_its_binary_decomposition() -> None:
    # 3000 = 2048 + 512 + 256 + 128 + 32 + 16 + 8
    assert aligned_cover(0, 3000) == [
        (11, 0),
        (9, 4),
        (8, 10),
        (7, 22),
        (5, 92),
        (4, 186),
        (3, 374),
    ]
    assert aligned_cover(0, 8) == [(3, 0)]
    assert aligned_cover(5, 13) == [(0, 5), (1, 3), (2, 2), (0, 12)]
    assert aligned_cover(4, 4) == []


@settings(max_examples=examples(300))
@given(st.integers(0, 5000), st.integers(0, 5000))
def test_the_cover_tiles_exactly_with_aligned_nodes_and_no_two_could_merge(a: int, b: int) -> None:
    start, end = min(a, b), max(a, b)
    cover = aligned_cover(start, end)
    at = start
    for level, index in cover:
        assert index << level == at  # aligned, and in order without gaps
        at += 1 << level
    assert at == end
    for left, right in itertools.pairwise(cover):
        # fewest: two adjacent siblings would be one node
        assert not (left[0] == right[0] and left[1] % 2 == 0 and right[1] == left[1] + 1)


def test_a_coarse_line_names_its_messages() -> None:
    assert coarse_text((11, 0)) == "[not yet summarized: messages 0–2047]"
    assert coarse_text((3, 5)) == "[not yet summarized: messages 40–47]"


# -- sizes and rendering -------------------------------------------------------------------


def test_the_rendered_size_is_the_size_of_the_rendered_text() -> None:
    core = behind(5)
    core.append("user", LONG)  # an unbuilt leaf: the placeholder
    lines = [(2, 0), (0, 4), (0, 5)]  # (2, 0) is unbuilt: a coarse line
    text = render(lines, lines_of(core))
    assert text.split("\n") == [
        "<chat>",
        "0+4|[not yet summarized: messages 0–3]",
        f"4+1|user: {FREE}",
        f"5+1|{PLACEHOLDER}",
        "</chat>",
    ]
    assert rendered_size(lines, shown_size(core.tree)) == len(text.encode())
    assert rendered_size([], shown_size(core.tree)) == len(render([], lines_of(core)))


# -- merging by the batch rule -------------------------------------------------------------


def test_a_view_that_fits_is_left_as_it_is() -> None:
    core = behind(8)
    size_of = shown_size(core.tree)
    room = rendered_size(core.view.nodes(), size_of)
    assert fit(core.view, core.t, core.tree, room).lines == core.view.nodes()
    assert not fit(core.view, core.t, core.tree, room).coarse_end


def test_built_parents_merge_most_due_first_until_it_fits() -> None:
    core = behind(8)
    for index in range(4):
        core.build((1, index), "p" * 100)
    size_of = shown_size(core.tree)
    before = core.view.nodes()
    room = rendered_size(before, size_of) - 1  # one merge is enough
    merged = merged_to_fit(core.view, core.t, core.tree, room)
    assert merged.nodes() == [(1, 0), *((0, i) for i in range(2, 8))]  # the oldest pair
    assert core.view.nodes() == before  # the core's view is not touched
    fitted = fit(core.view, core.t, core.tree, room)
    assert fitted.lines == merged.nodes() and fitted.coarse_end == 0
    assert rendered_size(fitted.lines, size_of) <= room


# -- coarse lines --------------------------------------------------------------------------


def test_the_oldest_lines_are_coarsened_first_and_nothing_else_changes() -> None:
    core = behind(13)
    size_of = shown_size(core.tree)
    lines = core.view.nodes()
    whole = rendered_size(lines, size_of)
    line = rendered_size([(0, 12)], size_of) - rendered_size([], size_of)
    # room for all but about two lines: the first four become one coarse line 0+4
    fitted, end = coarsened(lines, size_of, whole - 2 * line)
    assert fitted == [(2, 0), *lines[4:]] and end == 4
    assert rendered_size(fitted, size_of) <= whole - 2 * line
    # less room: the first 12 become 0+8 and 8+4, the last line stays whole
    fitted, end = coarsened(lines, size_of, rendered_size([(3, 0), (2, 2), (0, 12)], size_of))
    assert fitted == [(3, 0), (2, 2), (0, 12)] and end == 12


@settings(max_examples=examples(200))
@given(st.integers(1, 300), st.integers(0, 200_000))
def test_coarse_lines_tile_the_oldest_messages_and_fit_when_anything_can(
    messages: int, room: int
) -> None:
    core = behind(messages)
    size_of = shown_size(core.tree)
    lines = core.view.nodes()
    fitted, end = coarsened(lines, size_of, room)
    assert tiles(fitted, core.t) and coarsens(fitted, lines)
    coarsest = aligned_cover(0, core.t)
    if rendered_size(coarsest, size_of) <= room:
        assert rendered_size(fitted, size_of) <= room
    else:
        assert fitted == coarsest
    # the lines after the coarse stretch are the view's own, untouched
    assert fitted == [*aligned_cover(0, end), *(n for n in lines if n[1] << n[0] >= end)]
    if end:  # and the stretch is no longer than it has to be: one line fewer would not fit
        shorter = max(n[1] << n[0] for n in lines if n[1] << n[0] < end)
        kept = [n for n in lines if n[1] << n[0] >= shorter]
        assert rendered_size([*aligned_cover(0, shorter), *kept], size_of) > room


def test_a_built_cover_node_shows_its_own_text() -> None:
    core = behind(6)
    core.build((1, 0), "a" * 300)
    core.build((1, 1), "b" * 300)  # no free parent: 300 + 1 + 300 > 512
    core.build((2, 0), "c" * 100)  # built, but no message came since: the view has 0+1 … 5+1
    size_of = shown_size(core.tree)
    room = rendered_size([(2, 0), (0, 4), (0, 5)], size_of)
    fitted, end = coarsened(core.view.nodes(), size_of, room)
    assert fitted == [(2, 0), (0, 4), (0, 5)] and end == 4
    assert render(fitted, lines_of(core)).split("\n")[1] == "0+4|" + "c" * 100


def test_fit_merges_what_it_can_then_coarsens_the_oldest() -> None:
    core = behind(16)
    for index in (6, 7):
        core.build((1, index), "p" * 300)  # only the newest two pairs have parents
    size_of = shown_size(core.tree)
    leaves = [(0, i) for i in range(8, 12)]
    room = rendered_size([(3, 0), *leaves, (1, 6), (1, 7)], size_of)
    fitted = fit(core.view, core.t, core.tree, room)
    # merged by the built parents, then the oldest eight messages as one coarse line
    assert fitted.lines == [(3, 0), *leaves, (1, 6), (1, 7)] and fitted.coarse_end == 8
    assert render(fitted.lines, lines_of(core)).split("\n")[1] == (
        "0+8|[not yet summarized: messages 0–7]"
    )
    assert core.view.nodes() == [(0, i) for i in range(16)]  # the core's view is not touched


# -- how far behind ------------------------------------------------------------------------


def test_nothing_to_go_when_the_view_fits_and_is_built() -> None:
    core = behind(8)
    room = rendered_size(core.view.nodes(), shown_size(core.tree))
    assert summaries_to_go(core.view, core.t, core.tree, room) == 0


def test_unbuilt_leaves_count_and_so_do_the_merges_the_view_needs() -> None:
    core = behind(4, LONG)  # four unbuilt leaves, shown as placeholders
    size_of = shown_size(core.tree)
    roomy = rendered_size(core.view.nodes(), size_of) * 100
    assert summaries_to_go(core.view, core.t, core.tree, roomy) == 4
    # room for about two typical lines: built, the leaves outgrow it, and the pairs must merge
    tight = rendered_size([(1, 0), (1, 1)], lambda node: TYPICAL_LINE)
    assert summaries_to_go(core.view, core.t, core.tree, tight) == 4 + 2
    # once the leaves are built, the merges are what is left
    for index in range(4):
        core.build((0, index), "l" * 300)
    assert summaries_to_go(core.view, core.t, core.tree, tight) == 2
    core.build((1, 0), "m" * 200)
    assert summaries_to_go(core.view, core.t, core.tree, tight) == 1


# -- the view's ceiling, not the window, is the bound (SPEC §3.2) ----------------------------


def test_a_view_over_its_ceiling_is_fitted_within_it_however_large_the_room() -> None:
    core = behind(400)  # 400 lines of 406 bytes: about 170 KB rendered
    budget = Budget(64_000, 32_000, 16_000, 8_000)
    size_of = shown_size(core.tree)
    fitted = fit(core.view, core.t, core.tree, ROOMY, budget)
    assert fitted.coarse_end > 0 and tiles(fitted.lines, core.t)
    # a new coarse stretch leaves the rest within the floor: later lines grow into the ceiling
    assert rendered_size(fitted.lines, size_of) <= budget.floor


def test_a_view_within_its_ceiling_is_sent_as_it_is() -> None:
    core = behind(100)  # about 42 KB
    fitted = fit(core.view, core.t, core.tree, ROOMY, Budget(64_000, 32_000, 16_000, 8_000))
    assert fitted.lines == core.view.nodes() and fitted.coarse_end == 0


def test_with_nothing_built_the_coarse_stretch_stays_and_the_copy_grows_at_its_end() -> None:
    core = behind(400)
    budget = Budget(64_000, 32_000, 16_000, 8_000)
    first = fit(core.view, core.t, core.tree, ROOMY, budget)
    for _ in range(10):  # a few turns' messages, no summary built
        core.append("user", FREE)
    later = fit(core.view, core.t, core.tree, ROOMY, budget, keep=first.coarse_end)
    assert later.coarse_end == first.coarse_end
    assert later.lines[: len(first.lines)] == first.lines
    assert rendered_size(later.lines, shown_size(core.tree)) <= budget.ceiling
    # … until the lines after it pass the ceiling: then a new stretch, within the floor again
    for _ in range(100):
        core.append("user", FREE)
    moved = fit(core.view, core.t, core.tree, ROOMY, budget, keep=first.coarse_end)
    assert moved.coarse_end > first.coarse_end
    assert rendered_size(moved.lines, shown_size(core.tree)) <= budget.floor


# -- runs of unbuilt leaves ----------------------------------------------------------------


def test_a_run_of_unbuilt_leaves_collapses_into_a_few_aligned_unbuilt_nodes() -> None:
    core = behind(3_000, LONG)  # no leaf is free: every line is an unbuilt leaf
    for i in (5, 6):
        core.build((0, i), "a summary")
    lines = core.view.nodes()
    shown = collapsed(lines, core.tree.is_built)
    assert tiles(shown, 3_000) and coarsens(shown, lines)
    assert shown[:5] == [(2, 0), (0, 4), (0, 5), (0, 6), (0, 7)]  # a lone one stays a leaf
    assert len(shown) <= 30
    assert not any(core.tree.is_built(node) for node in shown if node not in ((0, 5), (0, 6)))
    assert collapsed(shown, core.tree.is_built) == shown


@given(st.lists(st.booleans(), min_size=1, max_size=80))
def test_collapsing_keeps_every_built_line_and_tiles_the_same_messages(built: list[bool]) -> None:
    lines = [(0, i) for i in range(len(built))]
    shown = collapsed(lines, lambda node: node[0] == 0 and built[node[1]])
    assert tiles(shown, len(built)) and coarsens(shown, lines)
    assert [node for node in shown if node[0] == 0 and built[node[1]]] == [
        (0, i) for i, ok in enumerate(built) if ok
    ]
