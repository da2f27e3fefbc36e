"""The texts of a compaction (SPEC §4.3, §4.4): the leaf task, the merge task and the follow-up
for a line that is too long. Each is one constant template with named fields; the functions
below only fill them in.

A task goes as the last text block of the compaction's user message, right after the context's
`</chat>`; it has no leading newline, the request layout adds the separator.
"""

from __future__ import annotations

from evertalk.memory.nodes import Node, first, last, node_name
from evertalk.memory.text import LINE_LIMIT, cut_utf8, flatten, leaf_input, utf8_len

RULER = "-" * LINE_LIMIT
"""One line of exactly 512 `-`: models cannot count bytes, so the task shows the length."""

LEAF_TASK = (
    "Compaction: compress message {id} into a single line of at most 512 bytes (about 70 "
    "words), no longer than the ruler below.\n" + RULER + "\n<input>\n{input}\n</input>"
)
"""Fields: `id`, the message's id; `input`, the message as `kind: text`, whole."""

MERGE_TASK = (
    "Compaction: merge the adjacent lines {left} and {right} into a single line no longer than "
    "the ruler below: at most 512 bytes (about 70 words).\n"
    + RULER
    + "\nThe <chat> above may show messages {first} to {last} in more detail, and you may take "
    "details of those messages from there as well.\n"
    "<input>\n{left}|{left_text}\n{right}|{right_text}\n</input>"
)
"""Fields: `left` and `right`, the lines' `id+n` names; `left_text` and `right_text`, their texts
flattened to one line each; `first` and `last`, the first and last message the merge covers."""

CUT_MARK = "[CUT]"
"""Where the limit falls, in the follow-up's copy of an over-long line."""

TOO_LONG = (
    "Too long: that line is {size} bytes and the limit is 512. Write the whole line again, for "
    "the same input, leaving out just enough of the least valuable items that it ends before "
    "the cut. Here are its first 512 bytes, with " + CUT_MARK + " where the limit falls:\n"
    "{head}" + CUT_MARK
)
"""Fields: `size`, the line's UTF-8 byte count; `head`, its first 512 bytes, whole characters."""


def leaf_task(index: int, kind: str, text: str) -> str:
    """The task that compresses message `index` of the given kind and text (SPEC §4.3)."""
    return LEAF_TASK.format(id=index, input=leaf_input(kind, text))


def merge_task(left: Node, left_text: str, right: Node, right_text: str) -> str:
    """The task that merges two sibling lines, `left` just before `right` (SPEC §4.3)."""
    if left[0] != right[0] or right[1] != left[1] + 1 or left[1] % 2:
        raise ValueError(f"not a sibling pair: {left} and {right}")
    return MERGE_TASK.format(
        left=node_name(left),
        right=node_name(right),
        left_text=flatten(left_text),
        right_text=flatten(right_text),
        first=first(left),
        last=last(right),
    )


def too_long(line: str) -> str:
    """The follow-up for a processed line over 512 bytes (SPEC §4.4 step 2)."""
    return TOO_LONG.format(size=utf8_len(line), head=cut_utf8(line, LINE_LIMIT))
