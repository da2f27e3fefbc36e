"""The newest messages a turn reads word for word while the chat is behind (SPEC §6.1).

Behind, the view's newest lines are mostly unbuilt: coarse ranges that say nothing of what was
just said or imported. The turn then gets those messages whole after the view, beside its new
message: the view keeps its own rules and its place in the cache, and the model can answer
about them without zooming blind. Whole messages only, chosen newest first within a budget and
shown oldest first; one too long for what is left is left out, never cut.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

from evertalk.memory import Node
from evertalk.memory.text import utf8_len
from evertalk.note_lines import zoomed_message
from evertalk.store.records import MessageRecord

BUDGET = 24_000
"""Bytes of newest messages a turn gets at most."""

CANDIDATES = 1_000
"""Messages looked at, newest first: a budget's worth of short ones, without reading the log."""

INTRO = (
    "<newest>\nNot summarized in the chat above yet, so shown here in full, oldest first; "
    "a gap in the ids is a message too long for this list (zoom it):"
)
OUTRO = "</newest>\n"


def unsummarized(lines: Sequence[Node], is_built: Callable[[Node], bool]) -> list[int]:
    """The ids under the unbuilt lines of a view, newest first, at most CANDIDATES."""
    ids: list[int] = []
    for node in reversed(lines):
        if is_built(node):
            continue
        level, index = node
        first = index << level
        for i in range(first + (1 << level) - 1, first - 1, -1):
            ids.append(i)
            if len(ids) == CANDIDATES:
                return ids
    return ids


def runs(ids: Sequence[int]) -> list[tuple[int, int]]:
    """Newest-first ids as ranges (start, stop) of consecutive ones: what to read ahead."""
    found: list[tuple[int, int]] = []
    for i in ids:
        if found and found[-1][0] == i + 1:
            found[-1] = (i, found[-1][1])
        else:
            found.append((i, i + 1))
    return found


def shown(record: MessageRecord) -> str:
    """A message as `zoom(id, 1)` shows it."""
    return f"{record.i}+1|{zoomed_message(record.kind, record.text)}"


def newest_block(records: Iterable[MessageRecord], budget: int) -> str:
    """The block of the messages that fit `budget` bytes, taken from `records` (newest first)
    and shown oldest first; "" when none fits."""
    left = budget - utf8_len(INTRO) - utf8_len(OUTRO) - 1
    chosen: list[str] = []
    for record in records:
        line = shown(record)
        size = utf8_len(line) + 1  # and its newline
        if size <= left:
            chosen.append(line)
            left -= size
    if not chosen:
        return ""
    return "\n".join([INTRO, *reversed(chosen), OUTRO])
