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
    "Compaction: squeeze message {id} into one line that fits within the ruler below, which is "
    "512 bytes long (about 70 words).\n" + RULER + "\n<input>\n{input}\n</input>"
)
"""Fields: `id`, the message's id; `input`, the message as `kind: text`, whole."""

MERGE_TASK = (
    "Compaction: {left} and {right} are adjacent lines; fuse them into one line that fits "
    "within the ruler below, 512 bytes at most (about 70 words).\n"
    + RULER
    + "\nMessages {first} to {last} may also show up at a finer grain in <chat> above, and "
    "details of them may be drawn from there too.\n"
    "<input>\n{left}|{left_text}\n{right}|{right_text}\n</input>"
)
"""Fields: `left` and `right`, the lines' `id+n` names; `left_text` and `right_text`, their texts
flattened to one line each; `first` and `last`, the first and last message the merge covers."""

CUT_MARK = "[CUT]"
"""Where the limit falls, in the follow-up's copy of an over-long line."""

TOO_LONG = (
    "Over the limit: your line has {size} bytes; 512 is the maximum. Write the complete line "
    "again for the same input, sacrificing its least important items, only enough of them to "
    "stop short of the cut. Its first 512 bytes, then " + CUT_MARK + " at the limit:\n"
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
