"""Free nodes (SPEC §2.3), driven through the core's events."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from budget import examples
from evertalk.memory import Budget, MemoryCore
from evertalk.memory.tree import BUILT, CUT, FREE, UNBUILT


def flag(core: MemoryCore, node: tuple[int, int]) -> int:
    level, index = node
    return core.tree.flags[level][index]


def big(n: int = 600) -> str:
    return "q" * n


def test_echo_506_is_free() -> None:
    core = MemoryCore()
    built = core.append("echo", "e" * 506)
    assert len(("echo: " + "e" * 506).encode()) == 512
    assert [(b.node, b.text, b.flag) for b in built] == [((0, 0), "echo: " + "e" * 506, FREE)]
    assert flag(core, (0, 0)) == FREE
    assert core.tree.sizes[0][0] == 512
    assert core.view.size == 512
    assert core.ready() == []


def test_echo_507_is_not_free() -> None:
    core = MemoryCore()
    assert core.append("echo", "e" * 507) == []
    assert flag(core, (0, 0)) == UNBUILT
    assert core.view.size == 29
    assert core.ready() == [(0, 0)]


def test_free_leaf_keeps_newlines_and_multibyte_text() -> None:
    core = MemoryCore()
    text = "line one\r\nline two\n" + "é" * 100
    [built] = core.append("user", text)
    assert built.text == "user: " + text  # exactly the input, newlines included
    assert core.tree.sizes[0][0] == len(("user: " + text).encode())
    # 2-byte characters: 6 + 2·253 = 512 is free, 6 + 2·254 = 514 is not
    assert core.append("note", "é" * 253)[0].flag == FREE
    assert core.append("note", "é" * 254) == []


@pytest.mark.parametrize(
    ("left", "right", "free"),
    [(256, 255, True), (255, 256, True), (256, 256, False), (1, 510, True), (1, 511, False)],
)
def test_parent_boundary(left: int, right: int, free: bool) -> None:
    core = MemoryCore()
    core.append("user", big())
    core.append("user", big())
    assert core.build((0, 0), "a" * left) == []
    built = core.build((0, 1), "b" * right)
    if free:
        text = "a" * left + "\n" + "b" * right
        assert [(b.node, b.text, b.flag) for b in built] == [((1, 0), text, FREE)]
        assert flag(core, (1, 0)) == FREE
        assert core.tree.sizes[1][0] == left + 1 + right
        assert core.ready() == []
    else:
        assert built == []
        assert flag(core, (1, 0)) == UNBUILT
        assert core.ready() == [(1, 0)]


def test_parent_boundary_in_bytes_not_characters() -> None:
    core = MemoryCore()
    core.append("user", big())
    core.append("user", big())
    core.build((0, 0), "é" * 128)  # 256 bytes, 128 characters
    assert core.build((0, 1), "é" * 128) == []  # 256 + 1 + 256 = 513 bytes
    assert core.ready() == [(1, 0)]


def test_free_leaf_next_to_built_leaf_makes_free_parent_at_append() -> None:
    core = MemoryCore()
    core.append("user", big())
    core.build((0, 0), "summary")
    built = core.append("user", "short")
    assert [(b.node, b.text, b.flag) for b in built] == [
        ((0, 1), "user: short", FREE),
        ((1, 0), "summary\nuser: short", FREE),
    ]


def test_free_parents_cascade_upward() -> None:
    core = MemoryCore()
    texts = [f"m{i}" for i in range(8)]
    built_by = []
    for text in texts:
        built_by.append([(b.node, b.flag) for b in core.append("user", text)])
    assert built_by[0] == [((0, 0), FREE)]
    assert built_by[1] == [((0, 1), FREE), ((1, 0), FREE)]
    assert built_by[3] == [((0, 3), FREE), ((1, 1), FREE), ((2, 0), FREE)]
    assert built_by[7] == [((0, 7), FREE), ((1, 3), FREE), ((2, 1), FREE), ((3, 0), FREE)]
    top = "\n".join(f"user: m{i}" for i in range(8))
    assert core.tree.sizes[3][0] == len(top)
    assert core.ready() == []


def test_cascade_stops_where_the_input_gets_too_big() -> None:
    core = MemoryCore()
    for _ in range(4):
        core.append("user", "x" * 194)  # leaf 200 bytes; pair 401; four would be 803
    assert flag(core, (1, 0)) == FREE and flag(core, (1, 1)) == FREE
    assert flag(core, (2, 0)) == UNBUILT
    assert core.ready() == [(2, 0)]


def test_build_completes_a_chain_of_free_parents() -> None:
    core = MemoryCore()
    core.append("user", "a")  # free
    core.append("user", big())  # not free
    core.append("user", "b")
    core.append("user", "c")  # (1, 1) free
    assert flag(core, (1, 1)) == FREE and flag(core, (1, 0)) == UNBUILT
    built = core.build((0, 1), "summary")
    assert [(b.node, b.flag) for b in built] == [((1, 0), FREE), ((2, 0), FREE)]
    assert core.tree.sizes[2][0] == len("user: a\nsummary\nuser: b\nuser: c")


def test_cut_node_can_make_a_free_parent() -> None:
    core = MemoryCore()
    core.append("user", big())
    core.append("user", big())
    assert core.build((0, 0), "x") == []
    core.fail((0, 1))
    core.fail((0, 1))
    built = core.fail((0, 1))
    assert [(b.node, b.flag) for b in built] == [((0, 1), CUT)]  # 1 + 1 + 512 > 512
    assert flag(core, (1, 0)) == UNBUILT
    assert core.ready() == [(1, 0)]


def test_model_leaf_is_built_not_free_even_if_short() -> None:
    core = MemoryCore()
    core.append("user", big())
    assert core.build((0, 0), "tiny") == []
    assert flag(core, (0, 0)) == BUILT


@settings(max_examples=examples(60), deadline=None)
@given(
    st.lists(
        st.one_of(
            st.tuples(st.just("append"), st.integers(0, 700)),
            st.tuples(st.just("build"), st.integers(0, 40), st.integers(1, 512)),
        ),
        max_size=60,
    )
)
def test_free_nodes_never_ready_and_always_built(events: list[tuple[str | int, ...]]) -> None:
    core = MemoryCore(Budget(3_000, 1_500, 1_000, 500, 4))
    for event in events:
        if event[0] == "append":
            core.append("user", "z" * event[1])
        elif core.ready():
            ready = core.ready()
            core.build(ready[event[1] % len(ready)], "w" * event[2])
        for level, row in enumerate(core.tree.flags):
            for index, value in enumerate(row):
                if value == FREE:
                    assert (level, index) not in core.ready()
                if (
                    value == UNBUILT
                    and level
                    and all(core.tree.flags[level - 1][2 * index + k] for k in (0, 1))
                ):
                    # an unbuilt parent with built halves is never one that fits in a line
                    a, b = core.tree.sizes[level - 1][2 * index : 2 * index + 2]
                    assert a + 1 + b > 512
                    assert (level, index) in core.ready()
        for index, value in enumerate(core.tree.flags[0] if core.tree.flags else []):
            if value == UNBUILT:
                assert len(core.tree.inputs[index].encode()) > 512
