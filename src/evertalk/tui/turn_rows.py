"""The rows of a turn as its events come: each reply streams into a Markdown row, each tool call
is a collapsed row whose title gets ✓ or ✗ when it finished, thoughts are dimmed, and every
message any window sent shows, held while a turn runs, until Ever takes it; then it moves to
where the log puts it (after what the turn did meanwhile), so the chat reads as it will when
reopened."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Protocol

from textual.widget import Widget
from textual.widgets import Markdown
from textual.widgets.markdown import MarkdownStream

from evertalk.client.remote import Message
from evertalk.memory.text import MESSAGE_LIMIT
from evertalk.protocol.events import (
    CallUsage,
    CatchingUp,
    Delivered,
    MemoryWarning,
    MessageSent,
    Quiet,
    Recorded,
    ReplyLogged,
    Retrying,
    Settling,
    TextDelta,
    ThinkingDelta,
    ToolFinished,
    ToolStarted,
    ToolsUnused,
    TurnEnded,
    TurnStarted,
    catching_up_text,
)
from evertalk.slash import RETRY_HINT
from evertalk.terminal_text import one_line
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

# A failed model call (TurnEnded's text says so) that reads as a refused key: the provider's
# error kind does not reach the app, its message does (a 401, "invalid x-api-key", …)
FAILED_CALL = "the model call failed:"
AUTH_WORDS = re.compile(
    r"\b40[13]\b|auth|api[ _-]?key|credential|forbidden|permission|billing|credit", re.IGNORECASE
)


PROCESS_ID = re.compile(r" \d+$")
"""The end of a client's name as the service gives it (`import 16545`)."""


def refused_key(error: str | None, kind: str | None = None) -> bool:
    """Whether a turn's error reads as the provider refusing the key."""
    if kind == "auth":
        return True
    return bool(error and error.startswith(FAILED_CALL) and AUTH_WORDS.search(error))


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


def split_note(pages: int) -> str:
    return (
        f"a long message: the log keeps it as {pages} messages of at most "
        f"{MESSAGE_LIMIT:,} characters, in order (the chat shows it whole)"
    )


class RowHost(Protocol):
    """What the rows need of the app."""

    busy: bool

    async def add_rows(self, *rows: Widget) -> None: ...

    def refresh_status(self) -> None: ...

    def client_name(self) -> str | None:
        """This window as the service names it in `sent` events."""
        ...

    async def messages(self, start: int, end: int) -> list[Message]: ...


class TurnRows:
    """The rows of the running turn (and of the messages held for it)."""

    def __init__(self, host: RowHost) -> None:
        self.host = host
        self._reply: ReplyView | None = None
        self._stream: MarkdownStream | None = None
        self._streamed = ""  # streamed reply text not yet matched by a ReplyLogged
        self._thought: ThoughtRow | None = None
        self._tools: dict[str, ToolRow] = {}
        self._held: list[list[Widget]] = []  # each held message's row, then its notes
        self.sending: list[Sending] = []  # sent, not yet shown
        self._settling: NoteRow | None = None
        self._said = True  # the running turn has shown a reply or a tool call

    async def _add(self, *rows: Widget) -> None:
        await self.host.add_rows(*rows)

    async def cut_short(self, why: str) -> None:
        """The service went: what was under way is shown as cut short."""
        await self.end_reply()
        await self._unsettle()
        for tool in self._tools.values():
            if not tool.finished:
                tool.finish(why, True)
        self._tools.clear()

    async def show(self, event: object) -> None:
        if isinstance(event, TextDelta):
            await self._text(event.text)
        elif isinstance(event, ThinkingDelta):
            await self._think(event.text)
        elif isinstance(event, ReplyLogged):
            await self._reply_logged(event.text)
        elif isinstance(event, ToolStarted):
            self._said = True
            await self.end_reply()
            row = ToolRow(event.name, event.input)
            self._tools[event.call_id] = row
            await self._add(row)
        elif isinstance(event, ToolFinished):
            found = self._tools.pop(event.call_id, None)
            if found is None:
                found = ToolRow(event.name, {})
                await self._add(found)
            found.finish(event.output, event.is_error or event.failed)
        elif isinstance(event, MessageSent):
            await self._sent(event)
        elif isinstance(event, Delivered):
            await self._delivered(event)
        elif isinstance(event, Settling):
            await self._waiting(f"waiting for summaries ({event.unbuilt})")
        elif isinstance(event, CatchingUp):
            await self._waiting(f"{catching_up_text(event)} (Ctrl+C cancels the turn)")
        elif isinstance(event, TurnStarted):
            await self._turn_started(event.message_ids)
        elif isinstance(event, TurnEnded):
            await self._turn_ended(event)
        elif isinstance(event, CallUsage):
            self.host.refresh_status()
        elif isinstance(event, Quiet):
            self.host.busy = False
        elif isinstance(event, MemoryWarning):
            await self._add(NoteRow(event.text, classes="memory"))
        elif isinstance(event, ToolsUnused):  # the row says why; the bar keeps a mark of it
            await self._add(NoteRow(event.text, classes="error"))
            self.host.refresh_status()
        elif isinstance(event, Recorded):
            await self._add(NoteRow(recorded_text(event)))
        elif isinstance(event, Retrying):  # a model call tried again (`retrying (2/3) after …`)
            await self._add(NoteRow(event.line))

    async def _text(self, text: str) -> None:
        self._thought = None
        if self._reply is None or self._stream is None:
            self._reply = ReplyView("")
            await self._add(self._reply)
            self._stream = Markdown.get_stream(self._reply)
        self._streamed += text
        await self._stream.write(text)

    async def _think(self, text: str) -> None:
        if self._reply is not None:
            await self.end_reply()
        if self._thought is None:
            self._thought = ThoughtRow()
            await self._add(self._thought)
        self._thought.add(text)

    async def _reply_logged(self, text: str) -> None:
        self._said = self._said or bool(text.strip())
        at = self._streamed.find(text)
        if at >= 0:
            self._streamed = self._streamed[at + len(text) :]
        else:  # it did not stream: show it whole
            await self.end_reply()
            await self._add(ReplyView(text))

    async def end_reply(self) -> None:
        stream, self._stream, self._reply = self._stream, None, None
        self._thought = None
        if stream is not None:
            await stream.stop()

    async def _delivered(self, event: Delivered) -> None:
        if event.kind == "work":
            await self.end_reply()
            await self._add(WorkRow(event.text))
            return
        for rows in self._held:
            if isinstance(rows[0], UserRow) and rows[0].text == event.text:
                self._held.remove(rows)
                await self.end_reply()
                _deliver(rows)
                return

    async def _waiting(self, text: str) -> None:
        """One row while the turn waits for summaries (SPEC §6.1) or for the chat to catch up,
        updated in place; it goes when the turn starts or ends."""
        if self._settling is None:
            self._settling = NoteRow(text)
            await self._add(self._settling)
        else:
            self._settling.set_text(text)

    async def _unsettle(self) -> None:
        if self._settling is not None:
            await self._settling.remove()
            self._settling = None

    async def _sent(self, event: MessageSent) -> None:
        """A message any window sent (this one's too): shown in every window, held while a
        turn runs."""
        names, pasted = "", tuple[str, ...]()
        own = event.client == self.host.client_name()
        for at, sending in enumerate(self.sending if own else []):
            if sending.text == event.text:
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
        if event.held:
            self._held.append(rows)
        else:
            self.host.busy = True  # its turn starts
        await self._add(*rows)

    async def _turn_started(self, ids: list[int]) -> None:
        await self._unsettle()
        self.host.busy = True
        self._streamed = ""
        self._said = False
        for rows in self._held:  # the turn's own messages, logged after the last turn's rows
            _deliver(rows)
        self._held.clear()
        if not ids:
            return
        # a subagent's report that starts a turn: the user has not seen it
        for message in await self.host.messages(min(ids), max(ids) + 1):
            if message.i in ids and message.kind == "work":
                await self._add(WorkRow(message.text))

    async def _turn_ended(self, event: TurnEnded) -> None:
        await self.end_reply()
        await self._unsettle()
        self._streamed = ""
        for tool in self._tools.values():
            if not tool.finished:
                tool.finish("cancelled before it finished", True)
        self._tools.clear()
        if event.reason == "error":
            await self._add(NoteRow(f"error: {event.error or 'the turn failed'}", classes="error"))
            if refused_key(event.error, event.error_kind):
                await self._add(NoteRow(KEY_HINT, classes="error"))
        elif event.reason in STOPPED:
            text = STOPPED[event.reason]
            if event.reason != "cancelled" and event.error:
                text = f"the turn stopped: {event.error}"
            classes = "error" if event.reason != "cancelled" else None
            await self._add(NoteRow(text, classes=classes))
        elif not self._said:  # done, and nothing came: say so rather than show nothing
            await self._add(NoteRow(EMPTY_REPLY))
        if event.retry:
            await self._add(NoteRow(RETRY_HINT))
        self._said = True
        self.host.refresh_status()


def _deliver(rows: list[Widget]) -> None:
    """A held message's rows, taken by Ever: no longer held, and moved to the end of the chat,
    where the log has the message (the turn's rows drawn meanwhile come before it)."""
    for row in rows:
        if isinstance(row, UserRow):
            row.delivered()
        parent = row.parent
        if isinstance(parent, Widget) and parent.children and parent.children[-1] is not row:
            parent.move_child(row, after=parent.children[-1])
