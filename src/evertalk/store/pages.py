"""Which lines of a message file count: the pages of a long message count only all together.

A long message's pages are written in one append (SPEC §1.6); a group that is not complete on
disk is an append that never returned, so its pages are skipped, as a torn line is (§1.4).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from evertalk.store.jsonl import Line
from evertalk.store.records import MessageRecord, decode_message

LOST_PAGE = "a page of a long message whose other pages are missing (its write never finished)"

Verdict = tuple[Line, MessageRecord | None, str | None]
"""A line, its message (None when it holds none) and why it is skipped (None: it counts)."""


def verdicts(lines: Iterable[Line]) -> Iterator[Verdict]:
    """Each line of a message file in file order, with whether it counts and why not."""
    group: list[tuple[Line, MessageRecord]] = []  # the pages of a long message read so far
    for line in lines:
        record = decode_message(line.record) if line.record is not None else None
        if record is None:
            yield from _lost(group)
            group = []
            yield line, None, line.reason or "not a valid message record"
        elif record.page is None:
            yield from _lost(group)
            group = []
            yield line, record, None
        else:
            if record.page.part == 0 or not _continues(group, record):
                yield from _lost(group)
                group = []
            group.append((line, record))
            if _complete(group):
                yield from ((page_line, page, None) for page_line, page in group)
                group = []
    yield from _lost(group)


def _lost(group: list[tuple[Line, MessageRecord]]) -> Iterator[Verdict]:
    return ((line, record, LOST_PAGE) for line, record in group)


def _continues(group: list[tuple[Line, MessageRecord]], record: MessageRecord) -> bool:
    if not group:
        return False
    last = group[-1][1]
    assert last.page is not None and record.page is not None
    return (
        record.i == last.i + 1
        and record.page.part == last.page.part + 1
        and record.page.parts == last.page.parts
    )


def _complete(group: list[tuple[Line, MessageRecord]]) -> bool:
    first = group[0][1].page
    assert first is not None
    return first.part == 0 and len(group) == first.parts
