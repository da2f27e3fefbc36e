"""The texts of a compaction (SPEC §4.3, §4.4, §4.8): the leaf task, the merge task, the
follow-ups for a line that is too long or not true to its input, and the cut copy of an over-long
reply that goes back in the conversation. Each is one constant template with named fields; the
functions below only fill them in.

A task goes as the last text block of the compaction's user message, right after the context's
`</chat>`; it has no leading newline, the request layout adds the separator.
"""

from __future__ import annotations

from collections.abc import Sequence

from evertalk.memory.nodes import Node, first, last, node_name
from evertalk.memory.text import LINE_LIMIT, cut_utf8, flatten, leaf_input, utf8_len

RULER = "-" * LINE_LIMIT
"""One line of exactly 512 `-`: a model has no sense of a byte count, so it is shown one."""

LEAF_TASK = (
    "Compaction: squeeze message {id} into one line that fits within the ruler below, which is "
    "512 bytes long (about 70 words).\n" + RULER + "\n<input>\n{input}\n</input>"
)
"""Fields: `id`, the message's id; `input`, `kind: text` of the whole message."""

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

SENT_BACK_LIMIT = 2 * LINE_LIMIT
"""The most bytes of an over-long reply that go back as the assistant's message of the size
loop's conversation. A small model that rambles writes tens of kilobytes; sent back whole, they
filled its window. Two lines' worth is enough for the model to see what it wrote."""

SENT_BACK = "{head} [CUT: {rest:,} more bytes of this reply are not shown]"
"""Fields: `head`, the reply's first SENT_BACK_LIMIT bytes, whole characters; `rest`, the bytes
left out. It starts like CUT_MARK, so that one rule strips either from a reply that copies it."""

TOO_LONG = (
    "Over the limit: your line has {size} bytes; 512 is the maximum. Write the complete line "
    "once more, from the same input, sacrificing its least important items, only as many as it "
    "takes to stop short of the cut. Its first 512 bytes, then " + CUT_MARK + " at the limit:\n"
    "{head}" + CUT_MARK
)
"""Fields: `size`, the line's UTF-8 byte count; `head`, its first 512 bytes, whole characters."""


NOT_GROUNDED = (
    "Not true to the input: {problems}. The line may only state what the input says: copy "
    "names, numbers, codes and paths from it exactly and invent none. Write the complete line "
    "once more, from the same input, within the 512 bytes."
)
"""Fields: `problems`, what the check found (`not_grounded`)."""

SHOWN_FACTS = 8
"""At most this many missing facts are named in the follow-up, each at most SHOWN_FACT bytes."""
SHOWN_FACT = 60


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


def sent_back(line: str) -> str:
    """An over-long processed line as it goes back in the conversation: whole up to
    SENT_BACK_LIMIT bytes, else its head and a note of what was left out."""
    if utf8_len(line) <= SENT_BACK_LIMIT:
        return line
    head = cut_utf8(line, SENT_BACK_LIMIT)
    return SENT_BACK.format(head=head, rest=utf8_len(line) - utf8_len(head))


def not_grounded(missing: Sequence[str], low_share: bool) -> str:
    """The follow-up for a line not true to its input (SPEC §4.8): `missing`, the facts it
    states that the input lacks; `low_share`, too few of its words come from the input."""
    problems: list[str] = []
    if missing:
        shown = ", ".join(f"`{cut_utf8(fact, SHOWN_FACT)}`" for fact in missing[:SHOWN_FACTS])
        problems.append(f"{shown} {'does' if len(missing) == 1 else 'do'} not occur in it")
    if low_share:
        problems.append("few of its words come from it")
    return NOT_GROUNDED.format(problems="; ".join(problems) or "it does not match the input")
