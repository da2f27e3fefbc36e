"""The service's frames as Textual messages: one message class for each kind of frame, each with
one handler in the app (`@shows`), so that what a frame does is found by its name.

The events of the turn (`protocol/events.py`) are shown by `TurnRows`; the other frames the
service sends unasked (a question, its withdrawal, a stop, new settings, an error, the log a
window follows) by the app.
The connection's worker hands each frame to the pump that shows it and waits until it has been
shown (`deliver`): frames show one at a time, in the order they came, as before.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any, ClassVar, Generic, Protocol, TypeVar

import anyio
from textual import on
from textual.css.query import NoMatches
from textual.message import Message as TextualMessage
from textual.message_pump import MessagePump
from textual.widget import Widget

from evertalk.client.connection import frame_name
from evertalk.client.remote import BadFrame, Received
from evertalk.protocol import events, replies
from evertalk.tui.widgets import NoteRow

F = TypeVar("F")
M = TypeVar("M", bound=TextualMessage)


class RowAdder(Protocol):
    """What a handler's owner offers: rows added at the end of the chat."""

    async def add_rows(self, *rows: Widget) -> None: ...


S = TypeVar("S", bound=RowAdder)
Handler = Callable[[S, M], Awaitable[None]]


def shows(kind: type[M]) -> Callable[[Handler[S, M]], Handler[S, M]]:
    """`@on(kind)`, the handler of one kind of frame; one that fails says so in a row rather
    than end the session, and the next frame shows all the same."""

    def decorate(handler: Handler[S, M]) -> Handler[S, M]:
        @functools.wraps(handler)
        async def guarded(self: S, message: M) -> None:
            try:
                await handler(self, message)
            except NoMatches:  # the app is closing: its widgets are gone
                return
            except Exception as error:
                await self.add_rows(NoteRow(f"display error: {error!r}", classes="error"))

        return on(kind)(guarded)

    return decorate


async def deliver(pump: MessagePump, message: TextualMessage) -> None:
    """Post `message` to `pump` and wait until its handler has run (a callback posted after it
    runs once it has); a pump that is closing takes neither."""
    shown = anyio.Event()
    if pump.post_message(message) and pump.call_later(shown.set):
        await shown.wait()


class Arrived(TextualMessage, Generic[F], bubble=False):
    """A frame of the service, typed: `frame`. Each concrete subclass names the frame class it
    carries (`of=`)."""

    of: ClassVar[type[Any]]
    _by_frame: ClassVar[dict[type[Any], type[Arrived[Any]]]] = {}

    def __init_subclass__(cls, of: type[Any] | None = None, **options: Any) -> None:
        super().__init_subclass__(**options)
        if of is not None:
            cls.of = of
            Arrived._by_frame[of] = cls

    def __init__(self, frame: F) -> None:
        super().__init__()
        self.frame = frame

    @staticmethod
    def kinds() -> dict[type[Any], type[Arrived[Any]]]:
        """The message class of each frame class."""
        return dict(Arrived._by_frame)


class TurnEvent(Arrived[F]):
    """An event of the turns (`protocol/events.py`): `TurnRows` shows it."""


class Notice(Arrived[F]):
    """A frame the service sends unasked that is not an event (a question, its withdrawal, a
    stop, new settings, an error): the app shows it."""


def arrived(frame: object) -> Arrived[Any] | None:
    """The message of a frame; None for one no message carries (a reply, a welcome)."""
    for cls in type(frame).__mro__:  # a subclass (the providers' Retrying) as its protocol class
        kind = Arrived.kinds().get(cls)
        if kind is not None:
            return kind(frame)
    return None


class AskArrived(Notice[replies.Ask], of=replies.Ask):
    pass


class AskClosedArrived(Notice[replies.AskClosed], of=replies.AskClosed):
    pass


class AskedElsewhereArrived(Notice[replies.AskedElsewhere], of=replies.AskedElsewhere):
    pass


class StoppingArrived(Notice[replies.Stopping], of=replies.Stopping):
    pass


class ReopenedArrived(Notice[replies.Reopened], of=replies.Reopened):
    pass


class LogFrame(Arrived[F]):
    """A frame of the log a window follows (`missed`, `logged`, `changed`): `LogRows` shows
    it."""


class MissedArrived(LogFrame[replies.Missed], of=replies.Missed):
    """What was logged since the window's position, first at each connection."""


class LoggedArrived(LogFrame[replies.Logged], of=replies.Logged):
    """Messages logged since the last such frame."""


class ChangedArrived(LogFrame[replies.Changed], of=replies.Changed):
    """Messages a forget changed."""


class ErrorArrived(Notice[replies.Error], of=replies.Error):
    """An error that answers no request (the app's requests get theirs as RequestFailed)."""


class TextDeltaArrived(TurnEvent[events.TextDelta], of=events.TextDelta):
    pass


class ThinkingDeltaArrived(TurnEvent[events.ThinkingDelta], of=events.ThinkingDelta):
    pass


class ReplyLoggedArrived(TurnEvent[events.ReplyLogged], of=events.ReplyLogged):
    pass


class ToolStartedArrived(TurnEvent[events.ToolStarted], of=events.ToolStarted):
    pass


class ToolFinishedArrived(TurnEvent[events.ToolFinished], of=events.ToolFinished):
    pass


class MessageSentArrived(TurnEvent[events.MessageSent], of=events.MessageSent):
    pass


class DeliveredArrived(TurnEvent[events.Delivered], of=events.Delivered):
    pass


class SettlingArrived(TurnEvent[events.Settling], of=events.Settling):
    pass


class CatchingUpArrived(TurnEvent[events.CatchingUp], of=events.CatchingUp):
    pass


class TurnStartedArrived(TurnEvent[events.TurnStarted], of=events.TurnStarted):
    pass


class TurnEndedArrived(TurnEvent[events.TurnEnded], of=events.TurnEnded):
    pass


class CallUsageArrived(TurnEvent[events.CallUsage], of=events.CallUsage):
    pass


class QuietArrived(TurnEvent[events.Quiet], of=events.Quiet):
    pass


class MemoryWarningArrived(TurnEvent[events.MemoryWarning], of=events.MemoryWarning):
    pass


class ToolsUnusedArrived(TurnEvent[events.ToolsUnused], of=events.ToolsUnused):
    pass


class RecordedArrived(TurnEvent[events.Recorded], of=events.Recorded):
    pass


class RetryingArrived(TurnEvent[events.Retrying], of=events.Retrying):
    pass


class FrameRouter:
    """Each frame to the handler of its kind (the turn's events to `rows`, the log's to `log`,
    the others to `app`), one at a time. A line that was no frame of the protocol is said in a
    row; a frame the app does not show (a late reply) goes to Textual's log, never to the chat.
    (One of a type this client does not know never comes: the connection skips it.)"""

    def __init__(
        self,
        app: MessagePump,
        rows: MessagePump,
        say: Callable[[str], Awaitable[None]],
        log: MessagePump | None = None,
    ) -> None:
        self.app = app
        self.rows = rows
        self.log = log or app  # the frames of the log a window follows
        self.say = say  # adds an error row to the chat

    async def show(self, frame: Received) -> None:
        """Show a frame; return once its handler has run."""
        if isinstance(frame, BadFrame):
            await self.say(str(frame))
            return
        message = arrived(frame)
        if message is None:  # a reply whose request no one waits for any more
            self.app.log.warning(f"skipped a {frame_name(frame)} frame no one waited for")
        elif isinstance(message, TurnEvent):
            await deliver(self.rows, message)
        else:
            await deliver(self.log if isinstance(message, LogFrame) else self.app, message)
