"""The request layout (SPEC §7, §4.2, §6.2): 4-line view blocks, byte-stable; marks where the
spec puts them and never more than 4; prefix keys for the gate."""

from __future__ import annotations

from dataclasses import replace
from itertools import pairwise

import pytest
from hypothesis import given
from hypothesis import strategies as st

from evertalk.providers.base import (
    Image,
    Message,
    Part,
    Request,
    Text,
    Thinking,
    Tool,
    ToolResult,
    ToolUse,
)
from evertalk.providers.layout import (
    MARK_REACH,
    MAX_MARKS,
    check_marks,
    compaction_request,
    count_marks,
    prefix_keys,
    turn_marks,
    turn_request,
    view_blocks,
)

TOOLS = [
    Tool("zoom", "Open a line.", {"type": "object"}),
    Tool("date", "When.", {"type": "object"}),
]

# view lines: flattened (no \r or \n), any other text, multi-byte included
line_text = st.text(alphabet=st.characters(blacklist_characters="\r\n"), max_size=12)
lines = st.lists(line_text, max_size=200)


def render(view_lines: list[str]) -> str:
    return "\n".join(["<chat>", *view_lines, "</chat>"])


def marked_parts(request: Request) -> list[tuple[int, int]]:
    """(message, part) positions of the marked parts."""
    return [
        (m, p)
        for m, message in enumerate(request.messages)
        for p, part in enumerate(message.parts)
        if isinstance(part, Text | Image | ToolResult) and part.mark
    ]


# --- view blocks -----------------------------------------------------------------------------


@given(lines)
def test_blocks_concatenate_back_exactly(view_lines: list[str]) -> None:
    rendered = render(view_lines)
    assert "".join(view_blocks(rendered)) == rendered


@given(lines)
def test_whole_blocks_hold_four_lines_each_ending_in_newline(view_lines: list[str]) -> None:
    blocks = view_blocks(render(view_lines))
    *whole, last = blocks
    for block in whole:
        assert block.endswith("\n")
        assert block.count("\n") == 4
        assert len(block.split("\n")) == 5 and block.split("\n")[-1] == ""
    assert last.endswith("</chat>")
    assert last.count("\n") <= 3
    assert len(whole) == (len(view_lines) + 1) // 4  # <chat> counts as the first line
    if whole:
        assert whole[0].startswith("<chat>\n")


@given(lines, st.lists(line_text, min_size=1, max_size=60))
def test_a_growing_view_keeps_its_whole_blocks(view_lines: list[str], more: list[str]) -> None:
    before = view_blocks(render(view_lines))
    after = view_blocks(render(view_lines + more))
    whole_before = before[:-1]
    assert after[: len(whole_before)] == whole_before
    assert len(after) >= len(before)


@given(lines)
def test_same_view_same_blocks(view_lines: list[str]) -> None:
    assert view_blocks(render(view_lines)) == view_blocks(render(list(view_lines)))


def test_small_views() -> None:
    assert view_blocks("<chat>\n</chat>") == ["<chat>\n</chat>"]
    assert view_blocks(render(["0+1|a", "1+1|b", "2+1|c"])) == [
        "<chat>\n0+1|a\n1+1|b\n2+1|c\n",
        "</chat>",
    ]
    assert view_blocks(render(["0+1|a", "1+1|b", "2+1|c", "3+1|d"])) == [
        "<chat>\n0+1|a\n1+1|b\n2+1|c\n",
        "3+1|d\n</chat>",
    ]


# --- marks -----------------------------------------------------------------------------------


def test_turn_marks_last_whole_block_and_20_and_40_before() -> None:
    assert turn_marks(0) == []
    assert turn_marks(1) == [0]
    assert turn_marks(20) == [19]
    assert turn_marks(21) == [0, 20]
    assert turn_marks(41) == [0, 20, 40]
    assert turn_marks(100) == [59, 79, 99]


@given(st.integers(0, 5000))
def test_turn_marks_are_at_most_three_spaced_by_20(whole: int) -> None:
    marks = turn_marks(whole)
    assert len(marks) <= 3
    if whole:
        assert marks[-1] == whole - 1
        assert all(b - a == 20 for a, b in pairwise(marks))
        assert all(m >= 0 for m in marks)


step_part = st.one_of(
    st.builds(Text, line_text, st.booleans()),
    st.builds(ToolResult, st.just("t1"), st.just([Text("out")]), st.booleans(), st.booleans()),
    st.builds(Image, st.just("image/png"), st.just("AAAA"), st.booleans()),
)
assistant = st.just(
    Message("assistant", [Thinking("t", "s"), Text("x"), ToolUse("t1", "zoom", {})])
)
steps = st.lists(
    st.tuples(
        assistant,
        st.lists(step_part, min_size=1, max_size=4).map(lambda p: Message("user", list[Part](p))),
    ),
    max_size=30,
).map(lambda pairs: [m for pair in pairs for m in pair])
tails = st.lists(
    st.one_of(st.builds(Text, line_text, st.booleans()), st.just(Image("image/png", "AA"))),
    min_size=1,
    max_size=3,
)


@given(lines, tails, steps)
def test_turn_requests_carry_the_view_marks_and_one_end_mark(
    view_lines: list[str], tail: list[Part], loop: list[Message]
) -> None:
    rendered = render(view_lines)
    request = turn_request("m", "SYS", TOOLS, rendered, tail, loop, 100)
    assert count_marks(request) <= MAX_MARKS
    blocks = view_blocks(rendered)
    # the system prompt takes the slot of a 20- or 40-back view mark the view is too short for
    assert request.system == [Text("SYS", mark=len(blocks) - 1 <= 2 * MARK_REACH)]
    assert request.tools == TOOLS
    assert request.tool_choice == "auto"
    first = request.messages[0]
    assert [p.text for p in first.parts[: len(blocks)] if isinstance(p, Text)] == blocks
    view_marks = [
        i for i, p in enumerate(first.parts[: len(blocks) - 1]) if isinstance(p, Text) and p.mark
    ]
    assert view_marks == turn_marks(len(blocks) - 1)
    end = (len(request.messages) - 1, len(request.messages[-1].parts) - 1)
    assert marked_parts(request) == [(0, i) for i in view_marks] + [end]
    after: list[Part] = [unmark(part) for part in tail]
    head = after[0]
    # the separator after </chat>: on the tail's first text, or a text of its own before an image
    after = [Text("\n" + head.text), *after[1:]] if isinstance(head, Text) else [Text("\n"), *after]
    expected = [Message("user", [*first.parts[: len(blocks)], *after])]
    expected += [Message(m.role, [unmark(p) for p in m.parts]) for m in loop]
    last = expected[-1]
    end_part = last.parts[-1]
    assert isinstance(end_part, Text | Image | ToolResult)
    expected[-1] = Message(last.role, [*last.parts[:-1], replace(end_part, mark=True)])
    assert request.messages == expected


def unmark(part: Part) -> Part:
    return replace(part, mark=False) if isinstance(part, Text | Image | ToolResult) else part


def view_of(whole: int) -> str:
    """A rendered view of exactly `whole` whole blocks (`<chat>` is the first line)."""
    return render([f"{i}+1|x" for i in range(max(4 * whole - 1, 0))])


@pytest.mark.parametrize("whole", [0, 1, 2, 19, 20, 21, 40])
def test_a_turn_with_a_short_view_marks_the_end_of_the_system_prompt(whole: int) -> None:
    """Without a 40-back view block there is a slot to spare: the tools and system prompt get
    it, so that the first turns of a chat, whose view blocks all change, read them back."""
    assert len(view_blocks(view_of(whole))) == whole + 1
    request = turn_request("m", "SYS", TOOLS, view_of(whole), [Text("hi")], [], 10)
    assert request.system == [Text("SYS", mark=True)]
    view_marks = [(0, i) for i in turn_marks(whole)]
    assert marked_parts(request) == [*view_marks, (0, whole + 1)]
    assert count_marks(request) == 2 + len(view_marks) <= MAX_MARKS


@pytest.mark.parametrize("whole", [41, 42, 100])
def test_a_turn_with_a_long_view_marks_three_view_blocks_and_the_end(whole: int) -> None:
    """The view marks keep their priority: with all three, the system prompt is not marked."""
    request = turn_request("m", "SYS", TOOLS, view_of(whole), [Text("hi")], [], 10)
    assert request.system == [Text("SYS")]
    last = whole - 1
    assert marked_parts(request) == [(0, last - 40), (0, last - 20), (0, last), (0, whole + 1)]
    assert count_marks(request) == MAX_MARKS


def test_the_end_mark_moves_as_the_loop_grows() -> None:
    view = render([f"{i}+1|x" for i in range(200)])
    step1 = [
        Message("assistant", [ToolUse("a", "zoom", {})]),
        Message("user", [ToolResult("a", [Text("r")])]),
    ]
    first = turn_request("m", "S", TOOLS, view, [Text("hi")], [], 10)
    second = turn_request("m", "S", TOOLS, view, [Text("hi")], step1, 10)
    assert first.messages[0].parts[-1] == Text("\nhi", mark=True)
    assert second.messages[0].parts[-1] == Text("\nhi")
    assert second.messages[-1].parts[-1] == ToolResult("a", [Text("r")], mark=True)
    assert count_marks(first) == count_marks(second) == 4
    # the view blocks are the same objects' values in both calls
    assert first.messages[0].parts[:-1] == second.messages[0].parts[:-1]


@given(lines, st.lists(st.tuples(line_text, line_text), max_size=10))
def test_compaction_requests_have_at_most_three_marks(
    context_lines: list[str], followups: list[tuple[str, str]]
) -> None:
    rendered = render(context_lines)
    request = compaction_request("m", "SYS", TOOLS, rendered, "Compaction: x", followups, 100)
    assert request.tool_choice == "none"
    assert request.system == [Text("SYS", mark=True)]
    blocks = view_blocks(rendered)
    first = request.messages[0]
    assert [p.text for p in first.parts if isinstance(p, Text)] == [*blocks, "\nCompaction: x"]
    whole = len(blocks) - 1
    end = (len(request.messages) - 1, len(request.messages[-1].parts) - 1)
    expected = ([(0, whole - 1)] if whole else []) + [end]
    assert marked_parts(request) == expected
    assert count_marks(request) == 1 + len(expected) <= MAX_MARKS
    assert len(request.messages) == 1 + 2 * len(followups)
    assert [m.role for m in request.messages] == ["user"] + ["assistant", "user"] * len(followups)


def test_more_than_four_marks_is_refused() -> None:
    request = Request(
        "m",
        [Text("s", mark=True)],
        [],
        [Message("user", [Text(str(i), mark=True) for i in range(4)])],
        10,
    )
    with pytest.raises(ValueError, match="at most 4"):
        check_marks(request)


# --- prefix keys -----------------------------------------------------------------------------


def compaction(context: list[str], task: str = "Compaction: x", model: str = "m") -> Request:
    return compaction_request(model, "SYS", TOOLS, render(context), task, [], 100)


@given(lines)
def test_prefix_keys_are_stable(context: list[str]) -> None:
    assert prefix_keys(compaction(context)) == prefix_keys(compaction(list(context)))
    assert len(prefix_keys(compaction(context))) == count_marks(compaction(context))


@given(st.lists(line_text, min_size=8, max_size=100), st.data())
def test_prefix_keys_change_when_a_byte_before_the_mark_changes(
    context: list[str], data: st.DataObject
) -> None:
    base = compaction(context)
    keys = prefix_keys(base)
    index = data.draw(st.integers(0, len(context) - 1))
    changed = list(context)
    changed[index] = changed[index] + "!"
    other = prefix_keys(compaction(changed))
    # the system prompt's key never depends on the context; the end key always does
    assert other[0] == keys[0]
    assert other[-1] != keys[-1]
    # the last whole block's key changes iff the changed line lies inside the whole blocks
    whole_lines = ((len(context) + 1) // 4) * 4 - 1  # view lines inside whole blocks
    if len(keys) == 3:
        assert (other[1] != keys[1]) == (index < whole_lines)


def test_prefix_keys_depend_on_model_tools_system_and_options() -> None:
    context = [f"{i}+1|x" for i in range(20)]
    keys = prefix_keys(compaction(context))
    assert len(keys) == 3
    assert prefix_keys(compaction(context, model="other"))[0] != keys[0]
    other_tools = compaction_request(
        "m", "SYS", TOOLS[:1], render(context), "Compaction: x", [], 100
    )
    assert prefix_keys(other_tools)[0] != keys[0]
    other_system = compaction_request("m", "SYS2", TOOLS, render(context), "Compaction: x", [], 100)
    assert prefix_keys(other_system)[0] != keys[0]
    # the task comes after the context mark: only the end key moves
    other_task = prefix_keys(compaction(context, task="Compaction: y"))
    assert other_task[:2] == keys[:2] and other_task[2] != keys[2]
    # marks do not count, tool_choice and effort do (for message marks, not the system's)
    request = compaction(context)
    unmarked_system = replace(request, system=[Text("SYS")])
    assert prefix_keys(unmarked_system) == keys[1:]
    with_effort = prefix_keys(replace(request, effort="high"))
    assert with_effort[0] == keys[0] and with_effort[1] != keys[1]
    assert prefix_keys(replace(request, tool_choice="auto"))[1] != keys[1]


def test_turn_and_compaction_share_the_system_prefix_key() -> None:
    """Both lay out the same tools and system prompt first (SPEC §4.2), and a turn with a short
    view marks them as a compaction does: one cache entry serves both."""
    view = render([f"{i}+1|x" for i in range(9)])
    turn = turn_request("m", "SYS", TOOLS, view, [Text("hi")], [], 10)
    assert prefix_keys(turn)[0] == prefix_keys(compaction(["0+1|x"]))[0]
