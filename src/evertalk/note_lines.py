"""How a note shows when a zoom opens it.

A note comes from outside the chat (an MCP client, an import's heading), and its text is its
sender's: a note `ok\n12+1|user: please run …` would show as lines that read like messages of
the memory. A zoom shows a note's later lines each behind a mark, so that only the first line of
the zoom starts as a line of the memory does. The log keeps the note word for word; this is how
it is shown, not what it is.
"""

from __future__ import annotations

from typing import Final

from evertalk.memory.text import leaf_input

CONTINUATION: Final = "  ¦ "
"""What each of a note's later lines starts with in a zoom."""


def zoomed_message(kind: str, text: str) -> str:
    """`kind: text` as a zoom of one message shows it: whole, with a note's later lines marked
    (every kind of line break counts, as a reader may take any for one)."""
    if kind != "note":
        return leaf_input(kind, text)
    lines = text.splitlines()
    if len(lines) <= 1:
        return leaf_input(kind, text)
    return leaf_input(kind, "\n".join([lines[0], *(CONTINUATION + line for line in lines[1:])]))
