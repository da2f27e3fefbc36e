"""The rows of the log a window shows, as a follower of it (`shown.py`): the last messages when
it opens, the page before the oldest shown as the user scrolls up, what was logged while it was
not connected (`missed`), what no event drew (`logged`), and every row a forget changed drawn
again (`changed`), so that no forgotten text stays on the screen, in the scroll-back or in
what Up brings back."""

from __future__ import annotations

from typing import Final, Protocol

from textual.css.query import NoMatches
from textual.widget import Widget

from evertalk.client.remote import Message, Remote, ServiceError, message_of
from evertalk.protocol import replies
from evertalk.slash import RETRY_HINT
from evertalk.terminal_text import counted
from evertalk.tui import service_messages as sm
from evertalk.tui.history import (
    EARLIER_MOST,
    EARLIER_PAGE,
    earlier_records,
    join_pages,
    opening_at,
    rows_of,
)
from evertalk.tui.service_messages import shows
from evertalk.tui.shown import Part, ShownLog
from evertalk.tui.turn_rows import TurnRows
from evertalk.tui.widgets import ChatLog, NoteRow, OutputRow, PromptInput, log_pages

UNANSWERED: Final = "the last message has no answer: its turn was cut short"
WITHDRAWN: Final = "(withdrawn: a forget changed what this showed)"
NEW_CHAT: Final = "A new chat. Say hello; /help lists the keys and the commands."


class LogHost(Protocol):
    """What the rows of the log need of the app."""

    remote: Remote | None
    rows: TurnRows

    @property
    def chat_log(self) -> ChatLog: ...

    @property
    def prompt(self) -> PromptInput: ...

    async def add_rows(self, *rows: Widget, last: bool = False) -> None: ...

    async def log_shown(self) -> None:
        """The log shows, the first time."""
        ...


class LogRows(Widget):
    """The rows of the log in the chat; a widget that shows nothing itself. `tail`: the log's
    last messages read from its files, shown before the service answers (`tail_rows`)."""

    DEFAULT_CSS = "LogRows { display: none; }"

    def __init__(self, host: LogHost, tail: list[Message]) -> None:
        super().__init__()
        self.host = host
        self.shown = ShownLog(tail[-1].i + 1 if tail else None)
        # the rows of the log shown: from message `oldest` on; `intro` says how many
        self.oldest = 0
        self.intro: NoteRow | None = None
        self.chat_size = 0  # messages in the chat when the window opened
        self._loading = False  # older rows are being fetched
        self.tail_rows = self._rows_from(tail[-1].i + 1, tail) if tail else []
        self._unshown: list[Widget] = []  # rows under way when it connected: drawn again
        self._since: int | None = None  # the position the hello gave
        self.edits: int | None = None  # the in-place changes applied (`store/edits.py`)
        self._followed = False  # a `missed` came: the window showed the log once

    async def add_rows(self, *rows: Widget) -> None:
        await self.host.add_rows(*rows)

    def follow_from(self) -> int:
        """The position to follow the log from at the next connection: what the window
        shows, less what was under way (a turn, a message held), taken away once the service
        says what the log holds from there (`missed`)."""
        since, self._unshown = self.shown.unshown(self.host.rows.under_way())
        self._since = since
        return since

    def _rows_from(self, t: int, last: list[Message]) -> list[Widget]:
        """The intro and the rows of `last`, the last messages of a log of `t`."""
        if t == 0:
            return [NoteRow(NEW_CHAT)]
        records = earlier_records(last)
        self.chat_size, self.oldest = t, t - len(records)
        self.intro = NoteRow(intro_text(t, self.oldest))
        drawn = rows_of(records)
        self.shown.drawn(drawn)
        return [self.intro, *(row for row, _ in drawn)]

    # -- the frames of the log ------------------------------------------------------------

    @shows(replies.Missed)
    async def _on_missed(self, message: sm.Arrived[replies.Missed]) -> None:
        """What was logged since the position the hello gave: what was under way is taken
        away and drawn from the log, after what the window said meanwhile."""
        frame = message.frame
        since = self._since or 0
        gone, self._unshown = self._unshown, []
        await self._take_away(gone)
        await self.host.rows.reset()
        records = [message_of(item) for item in frame.records]
        if self.shown.oldest() is None or frame.t < since or frame.first > since:
            await self._open_afresh(frame.t, records)
        else:
            await self._draw(records)
            if not self._followed and self.intro is not None:  # the chat as it is now
                self.chat_size = frame.t
                self.intro.set_text(intro_text(frame.t, self.oldest))
        self.shown.position = frame.t
        self.edits = frame.edits  # a `changed` with the rest follows, when some were missed
        if frame.turning:
            self.host.rows.joined_late()
        elif frame.unanswered:
            await self.host.add_rows(NoteRow(f"{UNANSWERED}; {RETRY_HINT}"))
        if not self._followed:
            self._followed = True
            await self.host.log_shown()

    @shows(replies.Logged)
    async def _on_logged(self, message: sm.Arrived[replies.Logged]) -> None:
        """Messages logged: the rows the events drew show them; those no event drew are drawn
        now. A turn this window joined late is drawn again from the log once it ended."""
        frame = message.frame
        records = [message_of(item) for item in frame.records]
        rows = self.host.rows
        await self._draw(self.shown.logged(frame.t, records, turning=rows.turning))
        redraw, rows.redraw = rows.redraw, []
        parts = [self.shown.part_of(row) for row in redraw]
        for part in dict.fromkeys(part for part in parts if part is not None):
            await self._redraw(part, {})

    @shows(replies.Changed)
    async def _on_changed(self, message: sm.Arrived[replies.Changed]) -> None:
        await self._changed([message_of(item) for item in message.frame.records])
        self.edits = message.frame.edits  # applied: the next hello says so

    # -- drawing --------------------------------------------------------------------------

    async def _open_afresh(self, t: int, records: list[Message]) -> None:
        """The log's last messages in place of what the window showed of it (its first
        connection, or more was logged meanwhile than one frame carries): above what the
        window said meanwhile."""
        log = self.host.chat_log
        shown = [row for part in self.shown.parts() for row in part.rows]
        old = [row for row in [*shown, *self.tail_rows, self.intro] if row is not None]
        self.shown.clear()
        self.tail_rows = []
        await log.remove_children([row for row in old if row.parent is log])
        rows = self._rows_from(t, records[-EARLIER_MOST:])
        if log.children:
            await log.mount_all(rows, before=0)
        else:
            await self.host.add_rows(*rows)

    async def _draw(self, records: list[Message]) -> None:
        """Messages of the log that no event drew: rows for them, at the end."""
        if records:
            drawn = rows_of(records, earlier=False)
            await self.host.add_rows(*(row for row, _ in drawn))
            self.shown.drawn(drawn)

    async def _take_away(self, rows: list[Widget]) -> None:
        self.shown.forget_rows(rows)
        self.host.rows.forget_rows(rows)
        log = self.host.chat_log
        await log.remove_children([row for row in rows if row.parent is log])

    async def _changed(self, records: list[Message]) -> None:
        """Messages a forget changed: every row that showed one is drawn again as the log
        has it, what Up brings back loses their old text, and the outputs that quoted the
        memory are withdrawn."""
        if not records:
            return
        new = {record.i: record for record in records}
        parts = self.shown.parts_with(new)
        old = {text for part in parts for text in _user_texts(part, set(new))}
        for part in parts:
            await self._redraw(part, new)
        prompt = self.host.prompt
        prompt.sent = [text for text in prompt.sent if text not in old]
        for row in self.host.chat_log.query(OutputRow).filter(".recalls"):
            row.withdraw(WITHDRAWN)

    async def _redraw(self, part: Part, new: dict[int, Message]) -> None:
        """The rows of `part` drawn again from its records, with `new` in place of theirs."""
        log = self.host.chat_log
        now = {i: new.get(i, record) for i, record in part.records.items()}
        records = [now[i] for i in sorted(now)]
        mounted = [row for row in log.children if row in part.rows]
        earlier = any(row.has_class("earlier") for row in part.rows)
        drawn = rows_of(records, earlier=earlier)
        if mounted:
            await log.mount_all([row for row, _ in drawn], before=mounted[0])
        self.host.rows.forget_rows(list(part.rows))
        self.shown.replaced(part, drawn if mounted else [])
        await log.remove_children(mounted)

    async def clear_screen(self) -> None:
        """`/clear`: every row off the screen. The log is followed on, and a scroll to the top
        brings its messages back, a page at a time, from the last one logged."""
        log = self.host.chat_log
        rows = list(log.children)
        self.shown.forget_rows(rows)
        self.host.rows.forget_rows(rows)
        await log.remove_children()
        self.tail_rows, self.intro = [], None
        self.oldest = self.chat_size = self.shown.position or 0

    # -- older rows -----------------------------------------------------------------------

    def at_top(self) -> None:
        """The user scrolled to the top: the page before the oldest row, if any."""
        remote = self.host.remote
        if self.oldest > 0 and not self._loading and remote is not None:
            self._loading = True
            self.run_worker(self._load_older(remote), group="older")

    async def _load_older(self, remote: Remote) -> None:
        """The messages before the oldest shown, a page of them, as rows above it; what was
        on the screen stays where it was."""
        try:
            start = max(0, self.oldest - EARLIER_PAGE)
            try:
                found = await remote.records(start=start, end=self.oldest)
            except ServiceError:
                return  # gone: the next scroll to the top tries again
            records = [record for record in found if record.i < self.oldest]
            records = records[opening_at(records, whole=start == 0) :]
            if not records:
                return
            log, intro = self.host.chat_log, self.intro
            shown = list(log.children)
            at = shown.index(intro) + 1 if intro in shown else 0
            below = shown[at] if at < len(shown) else None  # the oldest row shown
            seen = below.virtual_region.y - log.scroll_y if below is not None else None
            drawn = rows_of(records)
            self.shown.drawn(drawn)
            rows = [row for row, _ in drawn]
            if intro is not None:
                await log.mount_all(rows, after=intro)
            else:
                await log.mount_all(rows, before=0)
            self.oldest = records[0].i
            if intro is not None:
                intro.set_text(intro_text(self.chat_size, self.oldest))
            if below is not None and seen is not None:
                # once laid out, the row that was under the intro is back where it was seen
                def keep() -> None:
                    log.scroll_to(y=below.virtual_region.y - seen, animate=False, immediate=True)

                log.call_after_refresh(keep)
        except NoMatches:  # the app is closing
            return
        finally:
            self._loading = False


def intro_text(t: int, oldest: int) -> str:
    """The first row: how many messages the chat has, and how many of them follow it."""
    follow = f"the last {t - oldest:,} follow" if t - oldest > 1 else "the last one follows"
    shown = f"; {follow}. Scroll up for earlier ones;" if oldest else "."
    return (
        f"{counted(t, 'message')} in this chat{shown} /memory shows what Ever remembers, "
        "/help the keys and the commands."
    )


def _user_texts(part: Part, ids: set[int]) -> list[str]:
    """The whole texts of the user's messages in `part` that have a page among `ids`."""
    pages = sorted(part.records.values(), key=lambda record: record.i)
    found = []
    for record in join_pages(pages):
        span = range(record.i, record.i + max(1, log_pages(record.text)))
        if record.kind == "user" and ids.intersection(span):
            found.append(record.text)
    return found
