"""The requests other agents use to share the memory (`evertalk mcp`, `evertalk import`): the view
as Ever sees it, `zoom`, `date`, and `append`, which logs messages from outside any turn (a note,
an import's history) in order, each once per key, with its own time."""

from __future__ import annotations

from datetime import datetime
from typing import Final

from evertalk.agent.session import Outside
from evertalk.chat import ToolInputError
from evertalk.protocol import events, replies, requests
from evertalk.providers.base import Image
from evertalk.service.context import HandlerTable, Reply, Served
from evertalk.service.session import Session, error_frame
from evertalk.store.errors import StoreError

APPEND_MOST: Final = 1_000
"""Messages one `append` request may carry: an import sends its history in batches."""


def view(service: Served, session: Session, request: requests.GetView) -> Reply:
    return replies.View(text=service.agent_open().chat.render_view())


def zoom(service: Served, session: Session, request: requests.GetZoom) -> Reply:
    chat = service.agent_open().chat
    try:
        return replies.Zoom(text=chat.zoom(request.id, request.n))
    except (ToolInputError, StoreError) as error:
        return error_frame("bad_request", f"zoom: {error}")


def date(service: Served, session: Session, request: requests.GetDate) -> Reply:
    chat = service.agent_open().chat
    try:
        return replies.Date(text=chat.date(request.id))
    except (ToolInputError, StoreError) as error:
        return error_frame("bad_request", f"date: {error}")


def append(service: Served, session: Session, request: requests.Append) -> Reply:
    """Log the messages now, a turn running or not: they are not part of it."""
    if not 0 < len(request.messages) <= APPEND_MOST:
        raise ValueError(f"messages is a list of 1 to {APPEND_MOST:,}")
    messages = [outside_message(item) for item in request.messages]
    ids, skipped = service.agent_open().record(messages)
    if ids:
        first = messages[0] if len(messages) == 1 else None
        service.broadcast(
            events.Recorded(
                session.name, len(ids), first.kind if first else None, first.text if first else None
            )
        )
    return replies.Appended(ids=ids, skipped=skipped)


HANDLERS: Final[HandlerTable] = {
    requests.GetView: view,
    requests.GetZoom: zoom,
    requests.GetDate: date,
    requests.Append: append,
}


def outside_message(item: requests.OutsideMessage) -> Outside:
    """An `append`'s message as the agent records it (a ValueError says why it cannot be)."""
    if not item.text.strip():
        raise ValueError("text is a string that is not empty")
    if item.key is not None and not item.key:
        raise ValueError("key is a string that is not empty")
    moment = None
    if item.date is not None:
        moment = datetime.fromisoformat(item.date)
        if moment.tzinfo is None:
            raise ValueError(f"date {item.date!r} has no time zone")
    images = tuple(Image(image.media_type, image.data) for image in item.images)
    return Outside(item.kind, item.text, moment, item.key, images)
