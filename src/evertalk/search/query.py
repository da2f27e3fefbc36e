"""The pure parts of search: a full-text query from what the user typed, the id of a hit, and
the view lines that cover it.

User text is taken literally: every word is quoted for SQLite's FTS5, so that `foo-bar "x`,
`NEAR(` or `a OR b` search for those words and never raise a syntax error. A search runs in
tiers: the whole text as one phrase first, then all of its words anywhere in the line; a hit of
an earlier tier ranks above any hit of a later one.
"""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Sequence
from dataclasses import dataclass

from evertalk.memory.nodes import Node, node_name

SLOTS = 64
"""A hit's row id is `last * SLOTS + slot`: `last`, the newest message it covers; `slot` 0 for a
message, level + 1 for a summary. Row ids then sort by recency, which breaks ties in the rank."""

K1, B = 1.2, 0.75
"""BM25's usual constants, for the term-frequency score (see tf_score)."""
MARK, END = "\x01", "\x02"
"""What the index puts around each match (see tf_score and snippet)."""
SNIPPET_WORDS = 16
_TOKEN = re.compile(r"[^\W_]+")
"""A token as SQLite's unicode61 tokenizer sees one, near enough: letters and digits."""

LINES_NAMED = 4
"""View lines named at most for a summary that spans several; the rest are counted."""


class EmptyQuery(ValueError):
    """The query holds no word to search for."""


@dataclass(frozen=True)
class Where:
    """What a row of the index holds: message `start` (count 1) or the summary of the `count`
    messages from `start` (its level is `count`'s log 2)."""

    start: int
    count: int
    summary: bool

    @property
    def name(self) -> str:
        return f"{self.start}+{self.count}"

    @property
    def node(self) -> Node:
        level = self.count.bit_length() - 1
        return (level, self.start >> level)


def message_rowid(i: int) -> int:
    return i * SLOTS


def node_rowid(level: int, index: int) -> int:
    last = ((index + 1) << level) - 1
    return last * SLOTS + level + 1


def where(rowid: int) -> Where:
    last, slot = divmod(rowid, SLOTS)
    if slot == 0:
        return Where(last, 1, summary=False)
    count = 1 << (slot - 1)
    return Where(last + 1 - count, count, summary=True)


def words(text: str) -> list[str]:
    """The words of `text` worth searching for: split at white space, each holding at least one
    letter or digit (a lone `-` or `"` would be an empty phrase). A NUL separates words too:
    SQLite would take it for the end of the query."""
    spaced = text.replace("\0", " ")
    return [word for word in spaced.split() if any(char.isalnum() for char in word)]


def tokens(text: str) -> list[str]:
    """The tokens of `text`, as the index splits it (near enough, to weigh a query's cost)."""
    return _TOKEN.findall(text)


def tf_score(marked: str, average: float, length: int | None = None) -> float:
    """The term-frequency part of BM25 for a text whose matches each begin with MARK: what
    ranks a common word's newest matches, where BM25 itself would read every match. Every word
    weighs the same (their rarity is not known), and a long text counts less. Its length is
    counted in words between white space, which Python counts ten times faster than tokens."""
    found = marked.count(MARK)
    length = text_length(marked) if length is None else length
    return found * (K1 + 1) / (found + K1 * (1 - B + B * length / max(average, 1.0)))


def text_length(text: str) -> int:
    """The length tf_score weighs a text by."""
    return len(text.split())


def snippet(marked: str, width: int = SNIPPET_WORDS) -> str:
    """About `width` words of a text whose matches are between MARK and END, from a little
    before the first match, on one line, the matches between « and »."""
    parts = marked.split()
    first = next((n for n, part in enumerate(parts) if MARK in part), 0)
    start = max(0, min(first - width // 4, len(parts) - width))
    end = min(len(parts), start + width)
    while end < len(parts) and _open_mark(parts[start:end]):  # never cut a match in two
        end += 1
    shown = " ".join(parts[start:end]).replace(MARK, "«").replace(END, "»")
    return ("… " if start else "") + shown + (" …" if end < len(parts) else "")


def _open_mark(parts: list[str]) -> bool:
    text = "".join(parts)
    return text.count(MARK) > text.count(END)


def quoted(text: str) -> str:
    """`text` as one FTS5 string: inside double quotes, each quote doubled. FTS5 tokenizes it
    into a phrase, so punctuation inside only separates words."""
    return '"' + text.replace('"', '""') + '"'


def tiers(text: str) -> list[str]:
    """The FTS5 queries of a search, best tier first: the words as one phrase, then (for more
    than one word) every word anywhere. EmptyQuery when there is no word to search for."""
    found = words(text)
    if not found:
        raise EmptyQuery("the query has no word to search for")
    phrase = quoted(" ".join(found))
    if len(found) == 1:
        return [phrase]
    return [phrase, " AND ".join(quoted(word) for word in found)]


def covering(view: Sequence[Node], start: int, count: int) -> list[Node]:
    """The view lines that messages `start` … `start + count - 1` fall in, oldest first: one
    line for a message, one or several for a summary. The view tiles messages 0 … T−1 in order
    (SPEC §3.1); messages past its end have no line."""
    starts = [index << level for level, index in view]
    first = bisect_right(starts, start) - 1
    if first < 0:
        return []
    found: list[Node] = []
    end = start + count
    for node in view[first:]:
        level, index = node
        if index << level >= end:
            break
        if (index + 1) << level > start:
            found.append(node)
    return found


def lines_text(lines: Sequence[Node]) -> str:
    """`in view line 0+8`, `in view lines 0+4, 4+4`, `in view lines 0+2, 2+2, … (9 lines)`."""
    if not lines:
        return "not in the view yet"
    if len(lines) == 1:
        return f"in view line {node_name(lines[0])}"
    names = [node_name(node) for node in lines]
    if len(names) > LINES_NAMED:
        shown = ", ".join(names[: LINES_NAMED - 1])
        return f"in view lines {shown}, … {names[-1]} ({len(names)} lines)"
    return f"in view lines {', '.join(names)}"
