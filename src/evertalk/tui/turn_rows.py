"""The rows of a turn as its events come: each reply streams into a Markdown row, each tool call
is a collapsed row whose title gets ✓ or ✗ when it finished, thoughts are dimmed, and every
message any window sent shows, held while a turn runs, until Ever takes it. A held message
stays below what the running turn draws meanwhile, the last rows of the chat, so that no reply
reads as the answer to it; once Ever takes it, it stands where the log puts it (after what the
turn did meanwhile), so the chat reads as it will when reopened.

Each row that shows the log is touched (`ShownLog.touch`) when its event comes, and again when
the turn ends: the `logged` frame after it says which messages they show."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Protocol

from textual.widget import Widget
from textual.widgets import Markdown
from textual.widgets.markdown import MarkdownStream

from evertalk.client.remote import Message
from evertalk.memory.text import MESSAGE_LIMIT
from evertalk.protocol import events
from evertalk.protocol.events import Recorded, catching_up_text
from evertalk.slash import RETRY_HINT
from evertalk.terminal_text import one_line
from evertalk.tui import service_messages as sm
from evertalk.tui.countdown import Countdown, countdown_line
from evertalk.tui.history import join_pages, rows_of
from evertalk.tui.service_messages import shows
from evertalk.tui.shown import ShownLog
from evertalk.tui.widgets import (
    NoteRow,
    ReplyView,
    ThoughtRow,
    ToolRow,
    UserRow,
    WorkRow,
    clip,
    log_pages,
)

KEY_HINT = "check your key with /setup (it also changes the provider and the base URL)"

EMPTY_REPLY = "(Ever gave an empty reply)"

STOPPED = {
    "cancelled": "cancelled: what was logged stays logged",
    "context_full": "the turn stopped: the context is full",
    "max_steps": "the turn stopped: too many model calls",
    "max_tokens": "the turn stopped: the reply reached the output limit",
    "refusal": "the turn stopped: the model refused to go on",
}

PROCESS_ID = re.compile(r" \d+$")
"""The end of a client's name as the service gives it (`import 16545`)."""


def refused_key(kind: str | None) -> bool:
    """Whether a failed model call's kind (TurnEnded's `error_kind`) is the provider refusing
    the key: the kind decides, never the words of the error."""
    return kind == "auth"


WHOLE_MOST = 50
"""The most messages of another machine shown whole at once; more are counted."""


def recorded_text(event: Recorded) -> str:
    """`note from mcp: …`, or `1,200 messages logged by import`: the program, without the
    process id the service adds to its name (the user knows programs, not pids)."""
    who = PROCESS_ID.sub("", event.client) or event.client
    if event.count == 1 and event.kind and event.text:
        return f"{event.kind} from {who}: {clip(one_line(event.text), 200)}"
    return f"{event.count:,} message{'s' if event.count != 1 else ''} logged by {who}"


@dataclass(frozen=True)
class Sending:
    """A message this window sent that has not shown yet: what goes with it, to show then."""

    text: str
    names: str  # the images attached, by name
    pasted: tuple[str, ...] = ()  # the big pastes in it, which show folded
    key: str | None = None  # the `send`'s, which its `sent` event carries back

    def echoed(self, event: events.MessageSent) -> bool:
        """Whether the event is this message's: by its key; by its text from a service that
        sends no key (the text is the log's, so a message it redacted is not found)."""
        return event.key == self.key if event.key is not None else event.text == self.text


def split_note(pages: int) -> str:
    return (
        f"a long message: the log keeps it as {pages} messages of at most "
        f"{MESSAGE_LIMIT:,} characters, in order (the chat shows it whole)"
    )


class RowHost(Protocol):
    """What the rows need of the app."""

    busy: bool
    shown: ShownLog

    async def add_rows(self, *rows: Widget, last: bool = False) -> None:
        """Rows at the end of the chat, above the messages held (`last`: below them)."""
        ...

    def refresh_status(self) -> None: ...

    def client_name(self) -> str | None:
        """This window as the service names it in `sent` events."""
        ...

    async def messages(self, start: int, end: int) -> list[Message]: ...


class TurnRows(Widget):
    """The rows of the running turn (and of the messages held for it), added to the chat by
    the handlers of the turn's events; a widget that shows nothing itself."""

    DEFAULT_CSS = "TurnRows { display: none; }"

    def __init__(self, host: RowHost) -> None:
        super().__init__()
        self.host = host
        self._reply: ReplyView | None = None
        self._stream: MarkdownStream | None = None
        self._streamed = ""  # streamed reply text not yet matched by a ReplyLogged
        self._thought: ThoughtRow | None = None
        self._tools: dict[str, ToolRow] = {}
        self._held: list[list[Widget]] = []  # each held message's row, then its notes
        self.sending: list[Sending] = []  # sent, not yet shown
        self._settling: NoteRow | None = None
        self.catching_up = False  # the turn waits for a chat that is behind: Enter starts it
        self.countdown: Countdown | None = None  # a model call's next try, counted down
        self._said = True  # the running turn has shown a reply or a tool call
        self._opening: list[Widget] = []  # a message that opens a turn, until it starts
        self._turn: list[Widget] = []  # the rows of the log the running turn drew
        self._turning = False  # a turn runs, or a message that opens one was sent
        self._late = False  # the window joined the running turn after it began
        self.redraw: list[Widget] = []  # rows of such a turn, drawn again from the log

    async def add_rows(self, *rows: Widget) -> None:
        await self.host.add_rows(*rows)

    async def _log_rows(self, *rows: Widget) -> None:
        """Rows that show the log: touched, and the running turn's."""
        await self.host.add_rows(*rows)
        self._touch(*rows)

    def _touch(self, *rows: Widget) -> None:
        self.host.shown.touch(*rows)
        if self._turning:
            self._turn += [row for row in rows if row not in self._turn]

    @property
    def turning(self) -> bool:
        """A turn runs, or a message that opens one was sent."""
        return self._turning

    def first_held(self) -> Widget | None:
        """The first row of the messages held: what the turn draws goes above it."""
        return self._held[0][0] if self._held else None

    def under_way(self) -> list[Widget]:
        """The rows of what the log does not hold yet, or may not: the running turn's, and
        the messages held."""
        held = [row for rows in self._held for row in rows]
        return [*self._opening, *self._turn, *held]

    async def reset(self) -> None:
        """The connection was lost and those rows taken away: nothing is under way."""
        await self.end_reply()
        await self._unsettle()
        self._tools.clear()
        self._held.clear()
        self._opening.clear()
        self._turn.clear()
        self._turning = False
        self._streamed = ""
        self._said = True
        self._late = False
        self.redraw = []

    def joined_late(self) -> None:
        """This window came during a turn: once it ends, its rows are drawn from the log."""
        self._late = self._turning = True

    def forget_rows(self, rows: list[Widget]) -> None:
        """Rows taken away (drawn again from the log): no event draws into them any more."""
        if self._reply in rows:
            self._reply = self._stream = None
        self._tools = {key: row for key, row in self._tools.items() if row not in rows}
        self._opening = [row for row in self._opening if row not in rows]
        self._turn = [row for row in self._turn if row not in rows]

    async def cut_short(self, why: str) -> None:
        """The service went: what was under way is shown as cut short."""
        await self.end_reply()
        await self._unsettle()
        for tool in self._tools.values():
            if not tool.finished:
                tool.finish(why, True)
        self._tools.clear()

    # -- the events, one handler each ------------------------------------------------------

    @shows(events.TextDelta)
    async def _on_text_delta(self, message: sm.Arrived[events.TextDelta]) -> None:
        self._thought = None
        if self._reply is None or self._stream is None:
            self._reply = ReplyView("")
            await self._log_rows(self._reply)
            self._stream = Markdown.get_stream(self._reply)
        self._streamed += message.frame.text
        await self._stream.write(message.frame.text)

    @shows(events.ThinkingDelta)
    async def _on_thinking_delta(self, message: sm.Arrived[events.ThinkingDelta]) -> None:
        if self._reply is not None:
            await self.end_reply()
        if self._thought is None:
            self._thought = ThoughtRow()
            await self.add_rows(self._thought)
        self._thought.add(message.frame.text)

    @shows(events.ReplyLogged)
    async def _on_reply_logged(self, message: sm.Arrived[events.ReplyLogged]) -> None:
        text = message.frame.text
        self._said = self._said or bool(text.strip())
        at = self._streamed.find(text)
        if at >= 0:
            self._streamed = self._streamed[at + len(text) :]
            if self._reply is not None:
                self._touch(self._reply)
        else:  # it did not stream: show it whole
            await self.end_reply()
            await self._log_rows(ReplyView(text))

    @shows(events.ToolStarted)
    async def _on_tool_started(self, message: sm.Arrived[events.ToolStarted]) -> None:
        event = message.frame
        self._said = True
        await self.end_reply()
        row = ToolRow(event.name, event.input)
        self._tools[event.call_id] = row
        await self._log_rows(row)

    @shows(events.ToolFinished)
    async def _on_tool_finished(self, message: sm.Arrived[events.ToolFinished]) -> None:
        event = message.frame
        found = self._tools.pop(event.call_id, None)
        if found is None:
            found = ToolRow(event.name, {})
            await self.add_rows(found)
        self._touch(found)
        found.finish(event.output, event.is_error or event.failed)

    @shows(events.Settling)
    async def _on_settling(self, message: sm.Arrived[events.Settling]) -> None:
        self.catching_up = False
        await self._waiting(f"waiting for summaries ({message.frame.unbuilt})")

    @shows(events.CatchingUp)
    async def _on_catching_up(self, message: sm.Arrived[events.CatchingUp]) -> None:
        self.catching_up = True
        text = catching_up_text(message.frame)
        await self._waiting(f"{text} (Enter starts the turn now; Ctrl+C cancels it)")

    @shows(events.CallUsage)
    async def _on_call_usage(self, message: sm.Arrived[events.CallUsage]) -> None:
        self.host.refresh_status()

    @shows(events.Quiet)
    async def _on_quiet(self, message: sm.Arrived[events.Quiet]) -> None:
        self.host.busy = False

    @shows(events.MemoryWarning)
    async def _on_memory_warning(self, message: sm.Arrived[events.MemoryWarning]) -> None:
        await self.add_rows(NoteRow(message.frame.text, classes="memory"))

    @shows(events.ToolsUnused)
    async def _on_tools_unused(self, message: sm.Arrived[events.ToolsUnused]) -> None:
        """The row says why; the bar keeps a mark of it."""
        await self.add_rows(NoteRow(message.frame.text, classes="error"))
        self.host.refresh_status()

    @shows(events.Recorded)
    async def _on_recorded(self, message: sm.Arrived[events.Recorded]) -> None:
        frame = message.frame
        if frame.first is None or frame.count > WHOLE_MOST:
            await self._log_rows(NoteRow(recorded_text(frame)))
            return
        # another machine's messages: shown whole, as this window shows its own, unless the
        # window drew them already from a `logged` frame that came first
        ids = range(frame.first, frame.first + frame.count)
        if all(self.host.shown.record(i) is not None for i in ids):
            return
        found = await self.host.messages(frame.first, frame.first + frame.count)
        if len(found) != frame.count:  # the service could not read them: say what came
            await self._log_rows(NoteRow(recorded_text(frame)))
            return
        # drawn as the log's rows, by their own ids: rows an event touched stand for what the
        # next `logged` holds, which would credit them with these (and leave these unshown);
        # a `logged` that came while they were read may have drawn some already
        fresh = [record for record in found if self.host.shown.record(record.i) is None]
        if not fresh:
            return
        drawn = rows_of(fresh)
        await self.host.add_rows(NoteRow(f"from {frame.client}:"), *(row for row, _ in drawn))
        self.host.shown.drawn(drawn)

    @shows(events.Retrying)
    async def _on_retrying(self, message: sm.Arrived[events.Retrying]) -> None:
        """A model call tried again (`retrying (2/3) after …`). A reply that starts over hides
        the row its failed try streamed into (never logged); the next try's deltas make one."""
        frame = message.frame
        if frame.replaces:
            if self._reply is not None:
                self._reply.display = False
            await self.end_reply()
            self._streamed = ""
        self.stop_countdown()
        row = NoteRow(countdown_line(frame, frame.delay))
        await self.add_rows(row)
        self.countdown = Countdown(self, row, frame)

    def stop_countdown(self) -> None:
        if self.countdown is not None:
            self.countdown.stop()
            self.countdown = None

    async def end_reply(self) -> None:
        stream, self._stream, self._reply = self._stream, None, None
        self._thought = None
        if stream is not None:
            await stream.stop()

    @shows(events.Delivered)
    async def _on_delivered(self, message: sm.Arrived[events.Delivered]) -> None:
        event = message.frame
        await self.end_reply()
        if event.kind == "work":
            await self._log_rows(WorkRow(event.text))
            return
        for rows in self._held:
            if isinstance(rows[0], UserRow) and rows[0].text == event.text:
                self._deliver(rows)
                return
        # sent before this window connected: it shows now, where the log has it
        await self._log_rows(UserRow(event.text))

    async def _waiting(self, text: str) -> None:
        """One row while the turn waits for summaries (SPEC §6.1) or for the chat to catch up,
        updated in place; it goes when the turn starts or ends."""
        if self._settling is None:
            self._settling = NoteRow(text)
            await self.add_rows(self._settling)
        else:
            self._settling.set_text(text)

    async def _unsettle(self) -> None:
        self.catching_up = False
        if self._settling is not None:
            await self._settling.remove()
            self._settling = None

    @shows(events.MessageSent)
    async def _on_message_sent(self, message: sm.Arrived[events.MessageSent]) -> None:
        """A message any window sent (this one's too): shown in every window, held while a
        turn runs."""
        event = message.frame
        names, pasted = "", tuple[str, ...]()
        own = event.client == self.host.client_name()
        for at, sending in enumerate(self.sending if own else []):
            if sending.echoed(event):
                names, pasted = sending.names, sending.pasted
                del self.sending[at]
                break
        rows: list[Widget] = [UserRow(event.text, held=event.held, pasted=pasted)]
        if names:
            rows.append(NoteRow(f"with {names}"))
        elif event.images:
            rows.append(NoteRow(f"with {event.images} image{'s' if event.images != 1 else ''}"))
        pages = log_pages(event.text)
        if pages > 1:
            rows.append(NoteRow(split_note(pages)))
        if event.held:  # below everything until Ever takes it
            self._held.append(rows)
            await self.host.add_rows(*rows, last=True)
            return
        self.host.busy = True  # its turn starts
        self._turning = True
        self._opening += rows
        await self._log_rows(*rows)

    @shows(events.TurnStarted)
    async def _on_turn_started(self, message: sm.Arrived[events.TurnStarted]) -> None:
        ids = message.frame.message_ids
        await self._unsettle()
        self.host.busy = True
        self._turning = True
        self._streamed = ""
        self._said = False
        opening = [row for row in self._opening if isinstance(row, UserRow)]
        self._touch(*self._opening)
        self._opening = []
        for rows in list(self._held):  # the turn's own messages, logged after the last turn's
            opening += [row for row in rows if isinstance(row, UserRow)]
            self._deliver(rows)
        if not ids:
            return
        expected = [row.text for row in opening]
        shown = self.host.shown.position or 0  # a retried message is shown already
        records = [r for r in await self.host.messages(min(ids), max(ids) + 1) if r.i in ids]
        for record in join_pages([r for r in records if r.i >= shown]):
            if record.kind == "work":  # a subagent's report that starts a turn: not seen yet
                await self._log_rows(WorkRow(record.text))
            elif record.kind == "user" and record.text in expected:
                expected.remove(record.text)
            elif record.kind == "user":  # sent before this window connected
                await self._log_rows(UserRow(record.text))

    @shows(events.TurnEnded)
    async def _on_turn_ended(self, message: sm.Arrived[events.TurnEnded]) -> None:
        event = message.frame
        self.stop_countdown()
        await self.end_reply()
        await self._unsettle()
        self._streamed = ""
        for tool in self._tools.values():
            if not tool.finished:
                tool.finish("cancelled before it finished", True)
        self._tools.clear()
        # the turn's stop is logged: its notes show it
        if event.reason == "error":
            await self._log_rows(
                NoteRow(f"error: {event.error or 'the turn failed'}", classes="error")
            )
            if refused_key(event.error_kind):
                await self._log_rows(NoteRow(KEY_HINT, classes="error"))
        elif event.reason in STOPPED:
            text = STOPPED[event.reason]
            if event.reason != "cancelled" and event.error:
                text = f"the turn stopped: {event.error}"
            classes = "error" if event.reason != "cancelled" else None
            await self._log_rows(NoteRow(text, classes=classes))
        elif not self._said:  # done, and nothing came: say so rather than show nothing
            await self._log_rows(NoteRow(EMPTY_REPLY))
        if event.retry:
            await self._log_rows(NoteRow(RETRY_HINT))
        self._said = True
        # the whole turn, and what opened it: one stretch of the log
        self._touch(*self._opening)
        self.host.shown.touch(*self._turn)
        if self._late:
            self.redraw, self._late = list(self._turn), False
        self._opening, self._turn, self._turning = [], [], False
        self.host.refresh_status()

    def _deliver(self, rows: list[Widget]) -> None:
        """A held message's rows, taken by Ever: no longer held, and where the log has the
        message, after the turn's rows drawn meanwhile and above the messages still held."""
        self._held.remove(rows)
        below = self.first_held()
        for row in rows:
            if isinstance(row, UserRow):
                row.delivered()
            parent = row.parent
            if not isinstance(parent, Widget) or not parent.children:
                continue
            if below is not None and below.parent is parent:
                parent.move_child(row, before=below)
            elif parent.children[-1] is not row:
                parent.move_child(row, after=parent.children[-1])
        self._touch(*rows)
