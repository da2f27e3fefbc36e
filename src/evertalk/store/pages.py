"""Which lines of a message file count: the pages of a long message count only all together.

A long message's pages are written in one append (SPEC §1.6); a group that is not complete on
disk is an append that never returned, so its pages are skipped, as a torn line is (§1.4).

`PageGroup` is the rule, for any reader of the lines; `verdicts` applies it to a `Scan`.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Generic, TypeVar

from evertalk.store.jsonl import Line
from evertalk.store.records import MessageRecord, Page, decode_message

LOST_PAGE = "a page of a long message whose other pages are missing (its write never finished)"

Verdict = tuple[Line, MessageRecord | None, str | None]
"""A line, its message (None when it holds none) and why it is skipped (None: it counts)."""

_T = TypeVar("_T")


class PageGroup(Generic[_T]):
    """The pages of one long message read so far, in file order, each with what the reader
    needs to place it (`_T`: a line, a position).

    Fed every line of a file in order: a page goes to `add`; any other line first calls `lose`,
    since a group that something else interrupts never finished.
    """

    def __init__(self) -> None:
        self._pages: list[tuple[_T, int, Page]] = []

    def __bool__(self) -> bool:
        return bool(self._pages)

    def add(self, item: _T, i: int, page: Page) -> tuple[list[_T], list[_T]]:
        """Take page `page` of message `i`: the items of an earlier group this page shows to be
        incomplete (lost), and the items of this page's group if it is now complete (they count).
        """
        lost = self.lose() if page.part == 0 or not self._continues(i, page) else []
        self._pages.append((item, i, page))
        first = self._pages[0][2]
        if first.part == 0 and len(self._pages) == first.parts:
            return lost, self.lose()
        return lost, []

    def lose(self) -> list[_T]:
        """End the group: the items of its pages (lost, unless `add` just completed it)."""
        items = [item for item, _, _ in self._pages]
        self._pages = []
        return items

    def _continues(self, i: int, page: Page) -> bool:
        if not self._pages:
            return False
        _, last_i, last = self._pages[-1]
        return i == last_i + 1 and page.part == last.part + 1 and page.parts == last.parts


def verdicts(lines: Iterable[Line]) -> Iterator[Verdict]:
    """Each line of a message file in file order, with whether it counts and why not."""
    group: PageGroup[tuple[Line, MessageRecord]] = PageGroup()
    for line in lines:
        record = decode_message(line.record) if line.record is not None else None
        if record is None or record.page is None:
            yield from _lost(group.lose())
            if record is None:
                yield line, None, line.reason or "not a valid message record"
            else:
                yield line, record, None
            continue
        lost, complete = group.add((line, record), record.i, record.page)
        yield from _lost(lost)
        yield from ((page_line, page, None) for page_line, page in complete)
    yield from _lost(group.lose())


def _lost(pages: list[tuple[Line, MessageRecord]]) -> Iterator[Verdict]:
    return ((line, record, LOST_PAGE) for line, record in pages)
