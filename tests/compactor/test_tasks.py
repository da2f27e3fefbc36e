"""The compaction texts (SPEC §4.3, §4.4 step 2): their structure is pinned here."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from evertalk.compactor.tasks import (
    CUT_MARK,
    LEAF_TASK,
    MERGE_TASK,
    NOT_GROUNDED,
    RULER,
    SENT_BACK_LIMIT,
    TOO_LONG,
    leaf_task,
    merge_task,
    not_grounded,
    sent_back,
    too_long,
)
from evertalk.memory.text import LINE_LIMIT


def test_ruler() -> None:
    assert RULER == "-" * 512
    assert len(RULER.encode()) == 512 == LINE_LIMIT


def test_templates_are_constants() -> None:
    for template in (LEAF_TASK, MERGE_TASK):
        assert template.startswith("Compaction: ")
        assert template.count(RULER) == 1
        assert template.split("\n")[1] == RULER  # the ruler right after the first sentence
        assert template.count("<input>") == template.count("</input>") == 1
        assert template.endswith("\n</input>")
        assert "512 bytes" in template and "70 words" in template
    assert "{id}" in LEAF_TASK.split("\n")[0]
    first = MERGE_TASK.split("\n")[0]
    assert "{left}" in first and "{right}" in first and "adjacent" in first
    assert "{first} to {last}" in MERGE_TASK.split("\n")[2]
    assert "512" in TOO_LONG and CUT_MARK in TOO_LONG
    assert not TOO_LONG.startswith("Compaction:")


# -- leaf ---------------------------------------------------------------------------------------


def test_leaf_task_structure() -> None:
    text = "back up ~/notes nightly\n\n  keep 7 copies\r\nand {braces} stay"
    task = leaf_task(41, "user", text)
    lines = task.split("\n")
    assert lines[0].startswith("Compaction: ")
    assert "message 41 " in lines[0]
    assert "512 bytes" in lines[0] and "ruler" in lines[0]
    assert lines[1] == RULER
    assert lines[2] == "<input>"
    assert task.endswith("\n</input>")
    body = task[task.index("<input>\n") + len("<input>\n") : -len("\n</input>")]
    assert body == "user: " + text  # whole, newlines kept


@given(st.text())
def test_leaf_keeps_any_message_whole(text: str) -> None:
    task = leaf_task(7, "echo", text)
    assert task.endswith(f"\n<input>\necho: {text}\n</input>")
    assert task.startswith("Compaction: ")


# -- merge --------------------------------------------------------------------------------------


def test_merge_task_structure() -> None:
    left = "user: asks for backups\never: wrote backup.sh"
    right = "tool: shell crontab -l\r\necho: (empty)\rever: added the cron line"
    task = merge_task((3, 4), left, (3, 5), right)
    lines = task.split("\n")
    assert lines[0].startswith("Compaction: ")
    assert "32+8" in lines[0] and "40+8" in lines[0] and "adjacent" in lines[0]
    assert "512 bytes" in lines[0] and "ruler" in lines[0]
    assert lines[1] == RULER
    assert "<chat>" in lines[2] and " 32 to 47 " in lines[2]
    assert lines[3:] == [
        "<input>",
        "32+8|user: asks for backups ever: wrote backup.sh",
        "40+8|tool: shell crontab -l echo: (empty) ever: added the cron line",
        "</input>",
    ]


def test_merge_of_two_leaves() -> None:
    task = merge_task((0, 6), "user: hi", (0, 7), "ever: hello")
    assert "6+1" in task and "7+1" in task and " 6 to 7 " in task
    assert task.endswith("<input>\n6+1|user: hi\n7+1|ever: hello\n</input>")


@pytest.mark.parametrize(
    ("left", "right"), [((0, 1), (0, 2)), ((1, 0), (0, 2)), ((2, 0), (2, 2)), ((1, 1), (1, 0))]
)
def test_merge_needs_a_sibling_pair(left: tuple[int, int], right: tuple[int, int]) -> None:
    with pytest.raises(ValueError):
        merge_task(left, "a", right, "b")


# -- the too-long follow-up ---------------------------------------------------------------------


def test_too_long_states_size_and_shows_head() -> None:
    line = "x" * 600
    text = too_long(line)
    first, shown = text.split("\n")
    assert "600 bytes" in first and "512 is the" in first and CUT_MARK in first
    assert "complete line" in first and "same input" in first and "least important" in first
    assert "cut" in first
    assert shown == "x" * 512 + CUT_MARK


@pytest.mark.parametrize("char", ["é", "€", "😀"])
@pytest.mark.parametrize("pad", [0, 1, 2, 3])
def test_too_long_head_ends_on_a_character(char: str, pad: int) -> None:
    # a multi-byte character straddles byte 512 for most paddings
    line = "a" * (510 + pad) + char * 40
    size = len(line.encode())
    text = too_long(line)
    assert f"{size} bytes" in text
    head = text.split("\n", 1)[1].removesuffix(CUT_MARK)
    raw = head.encode()
    assert line.encode().startswith(raw)
    assert len(raw) <= 512 < len(raw) + len(char.encode())


ONE_LINE = st.characters(blacklist_categories=["Cs"], blacklist_characters="\r\n")


@given(st.text(ONE_LINE, min_size=513, max_size=900))
def test_too_long_head_is_the_longest_whole_prefix(line: str) -> None:
    head = too_long(line).split("\n", 1)[1].removesuffix(CUT_MARK)
    raw = head.encode()
    assert line.startswith(head)
    assert len(raw) <= 512
    assert len(raw) + len(line[len(head)].encode()) > 512


# -- the cut copy of an over-long reply ---------------------------------------------------------


def test_a_reply_of_two_lines_goes_back_whole() -> None:
    line = "x" * SENT_BACK_LIMIT
    assert SENT_BACK_LIMIT == 1_024 and sent_back(line) == line


def test_a_longer_reply_goes_back_cut_and_marked() -> None:
    line = "x" * 20_000
    assert sent_back(line) == "x" * 1_024 + " [CUT: 18,976 more bytes of this reply are not shown]"


@given(st.text(ONE_LINE, min_size=300, max_size=3_000))
def test_the_cut_copy_is_a_whole_prefix(line: str) -> None:
    copy = sent_back(line)
    head = copy.split(" [CUT: ")[0] if len(line.encode()) > SENT_BACK_LIMIT else copy
    assert line.startswith(head) and len(head.encode()) <= SENT_BACK_LIMIT
    assert len(copy.encode()) <= SENT_BACK_LIMIT + 60


# -- the follow-up for a line not true to its input ---------------------------------------------


def test_not_grounded_names_what_is_missing() -> None:
    text = not_grounded(["LH4521", "/etc/x.conf"], low_share=False)
    assert text.startswith("Not true to the input: `LH4521`, `/etc/x.conf` do not occur in it.")
    assert "512 bytes" in text and "same input" in text and "invent" in text
    assert not_grounded(["LH4521"], low_share=True).startswith(
        "Not true to the input: `LH4521` does not occur in it; few of its words come from it."
    )
    assert not_grounded([], low_share=True).startswith(
        "Not true to the input: few of its words come from it."
    )
    assert not NOT_GROUNDED.startswith("Compaction:") and "\n" not in NOT_GROUNDED


def test_not_grounded_keeps_to_a_few_short_facts() -> None:
    text = not_grounded([f"CODE{k}-" + "x" * 200 for k in range(20)], low_share=False)
    assert text.count("`") == 2 * 8 and len(text.encode()) < 1_000
