"""What a window shows of the log, as a follower of it (the follower rule, SPEC §13).

The window's position is the number of messages of the log it shows: the service tells it
(`missed` at each connection, `logged` as messages are logged), and the window gives it in its
hello when it connects again, to be sent only what it missed.

The rows a turn's events draw (a reply as it streams, a tool call, a message sent) are
`touched` until the next `logged` frame, which holds the messages they show: then they become a
`Part`, rows and the records they show. A row touched again later (a reply that goes on after
a tool call, a message a turn takes) joins its part to the new one. So every row that shows the
log belongs to a part that knows its messages: a forget replaces the rows of each part that
showed a changed message, and a window that connects again drops what it had not been told was
logged, and shows it from the log.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from textual.widget import Widget

from evertalk.client.remote import Message


@dataclass(eq=False)
class Part:
    """Rows of the window and the messages of the log they show."""

    rows: list[Widget] = field(default_factory=list)
    records: dict[int, Message] = field(default_factory=dict)

    @property
    def start(self) -> int | None:
        return min(self.records) if self.records else None


class ShownLog:
    """The window's position in the log, and which rows show which of its messages."""

    def __init__(self, position: int | None = None) -> None:
        self.position = position
        self._of_row: dict[Widget, Part] = {}
        self._of_id: dict[int, Part] = {}
        self._touched: list[Widget] = []
        self._untaken: dict[int, Message] = {}  # logged during a turn, no row touched since

    # -- rows from the log ----------------------------------------------------------------

    def drawn(self, rows: Iterable[tuple[Widget, list[Message]]]) -> None:
        """Rows drawn from the log's records (an opening, older pages, what was missed)."""
        for row, records in rows:
            self._add(Part([row], {record.i: record for record in records}))

    def touch(self, *rows: Widget) -> None:
        """Rows an event drew or changed: the next `logged` frame holds what they show."""
        for row in rows:
            if row not in self._touched:
                self._touched.append(row)

    def logged(self, t: int, records: list[Message], *, turning: bool = False) -> list[Message]:
        """The messages logged up to `t`: the rows touched since show them. With none, the
        records no event drew, for the window to draw them (`drawn`); while a turn runs, they
        go with the next rows touched (a turn's rows are one part once it ends)."""
        self.position = t
        if not self._touched and not turning:
            found, self._untaken = [*self._untaken.values(), *records], {}
            return [record for record in found if record.i not in self._of_id]  # drawn: kept
        self._untaken.update((record.i, record) for record in records)
        if not self._touched:
            return []
        touched, self._touched = self._touched, []
        records, self._untaken = list(self._untaken.values()), {}
        merged = Part()
        for part in {self._of_row[row] for row in touched if row in self._of_row}:
            self._drop(part)
            merged.rows += part.rows
            merged.records.update(part.records)
        merged.rows += [row for row in touched if row not in merged.rows]
        merged.records.update((record.i, record) for record in records)
        self._add(merged)
        return []

    # -- a forget, a reconnection ---------------------------------------------------------

    def parts_with(self, ids: Iterable[int]) -> list[Part]:
        """The parts that show any of these messages."""
        found: list[Part] = []
        for i in ids:
            part = self._of_id.get(i)
            if part is not None and part not in found:
                found.append(part)
        return found

    def replaced(self, part: Part, rows: Iterable[tuple[Widget, list[Message]]]) -> None:
        """The rows of `part` gave way to `rows`, drawn from its records as they are now."""
        self._drop(part)
        self.drawn(rows)

    def unshown(self, rows: Iterable[Widget]) -> tuple[int, list[Widget]]:
        """Where to follow from once the connection is lost, with these rows under way (a
        turn's, a message held): the position before every part they belong to, and the rows
        to take away then (every part from there on, and the rows touched since)."""
        since = min([self.position or 0, *self._untaken])
        self._untaken = {}
        rows = [*rows, *self._touched]
        for row in rows:
            part = self._of_row.get(row)
            if part is not None and part.start is not None:
                since = min(since, part.start)
        parts = self.parts()
        while True:  # a part that holds messages on both sides goes whole
            astride = [
                p.start for p in parts if p.start is not None and p.start < since <= max(p.records)
            ]
            if not astride:
                break
            since = min(start for start in astride if start is not None)
        gone = list(dict.fromkeys(rows))
        for part in parts:
            if part.records and max(part.records) >= since:
                gone += [row for row in part.rows if row not in gone]
        return since, gone

    def forget_rows(self, rows: Iterable[Widget]) -> None:
        """Rows taken away from the window."""
        for row in rows:
            part = self._of_row.pop(row, None)
            if part is not None:
                if row in part.rows:
                    part.rows.remove(row)
                if not part.rows:
                    self._drop(part)
            if row in self._touched:
                self._touched.remove(row)

    def parts(self) -> list[Part]:
        return list(dict.fromkeys(self._of_row.values()))

    def part_of(self, row: Widget) -> Part | None:
        return self._of_row.get(row)

    def oldest(self) -> int | None:
        """The id of the oldest message shown."""
        return min(self._of_id, default=None)

    def record(self, i: int) -> Message | None:
        part = self._of_id.get(i)
        return None if part is None else part.records.get(i)

    def clear(self) -> None:
        self._of_row.clear()
        self._of_id.clear()
        self._touched.clear()
        self._untaken.clear()

    def _add(self, part: Part) -> None:
        for row in part.rows:
            self._of_row[row] = part
        for i in part.records:
            self._of_id[i] = part

    def _drop(self, part: Part) -> None:
        for row in part.rows:
            if self._of_row.get(row) is part:
                del self._of_row[row]
        for i in part.records:
            if self._of_id.get(i) is part:
                del self._of_id[i]
