"""The service's frames as Textual messages: one message class for each kind of frame the app
shows, made here from the protocol's unions (Textual finds a handler by the message's class),
each with one handler in the app, `@shows(TheFrame)`, so that what a frame does is found by its
name.

The events of the turn (`protocol/events.py`) are shown by `TurnRows`; the other frames the
service sends unasked (a question, its withdrawal, a stop, new settings, an error, the log a
window follows) by the app.
The connection's worker hands each frame to the pump that shows it and waits until it has been
shown (`deliver`): frames show one at a time, in the order they came, as before.
"""

from __future__ import annotations

import functools
import types
from collections.abc import Awaitable, Callable
from typing import Any, ClassVar, Final, Generic, Protocol, TypeVar, cast, get_args

import anyio
from textual import on
from textual.css.query import NoMatches
from textual.message import Message as TextualMessage
from textual.message_pump import MessagePump
from textual.widget import Widget

from evertalk.client.connection import frame_name
from evertalk.client.remote import BadFrame, Received
from evertalk.protocol import frames, replies
from evertalk.tui.widgets import NoteRow

F = TypeVar("F")
M = TypeVar("M", bound=TextualMessage)


class RowAdder(Protocol):
    """What a handler's owner offers: rows added at the end of the chat."""

    async def add_rows(self, *rows: Widget) -> None: ...


S = TypeVar("S", bound=RowAdder)
Handler = Callable[[S, M], Awaitable[None]]


def shows(frame: type[F]) -> Callable[[Handler[S, Arrived[F]]], Handler[S, Arrived[F]]]:
    """`@on` the message of `frame`: the handler of one kind of frame; one that fails says so in
    a row rather than end the session, and the next frame shows all the same."""
    kind = Arrived.kinds().get(frame)
    if kind is None:
        raise TypeError(f"{frame.__name__} is no frame the app is sent unasked")

    def decorate(handler: Handler[S, Arrived[F]]) -> Handler[S, Arrived[F]]:
        @functools.wraps(handler)
        async def guarded(self: S, message: Arrived[F]) -> None:
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
    """A frame of the service, typed: `frame`. Each frame class the app shows has its own
    subclass (`kinds`), which names it (`of=`)."""

    of: ClassVar[type[Any]]

    def __init__(self, frame: F) -> None:
        super().__init__()
        self.frame = frame

    @staticmethod
    def kinds() -> dict[type[Any], type[Arrived[Any]]]:
        """The message class of each frame class."""
        return dict(_KINDS)


class TurnEvent(Arrived[F]):
    """An event of the turns (`protocol/events.py`): `TurnRows` shows it."""


class Notice(Arrived[F]):
    """A frame the service sends unasked that is not an event (a question, its withdrawal, a
    stop, new settings, an error): the app shows it."""


class LogFrame(Arrived[F]):
    """A frame of the log a window follows (`missed`, `logged`, `changed`): `LogRows` shows
    it."""


def _message_class(frame: type[Any], family: type[Arrived[Any]]) -> type[Arrived[Any]]:
    """`TextDeltaArrived`, the `family` message of `frame` (Textual's `on_text_delta_arrived`)."""
    name = f"{frame.__name__}Arrived"
    made = types.new_class(
        name,
        (family,),
        {"bubble": False},
        lambda body: body.update(__module__=__name__, __qualname__=name, of=frame),
    )
    return cast(type[Arrived[Any]], made)


_NOTICES: Final = (*get_args(frames.NoticeFrame), replies.Error)  # an error may come unasked
_KINDS: Final = {
    **{cls: _message_class(cls, TurnEvent) for cls in get_args(frames.EventFrame)},
    **{cls: _message_class(cls, Notice) for cls in _NOTICES},
    **{cls: _message_class(cls, LogFrame) for cls in get_args(frames.FollowerFrame)},
}


def arrived(frame: object) -> Arrived[Any] | None:
    """The message of a frame; None for one no message carries (a reply, a welcome)."""
    for cls in type(frame).__mro__:  # a subclass (the providers' Retrying) as its protocol class
        kind = _KINDS.get(cls)
        if kind is not None:
            return kind(frame)
    return None


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
