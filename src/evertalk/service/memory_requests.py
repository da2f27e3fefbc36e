"""The requests other agents use to share the memory (`evertalk mcp`, `evertalk import`): the view
as Ever sees it, `zoom`, `date`, and `append`, which logs messages from outside any turn (a note,
an import's history) in order, each once per key, with its own time."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, Any, Final

from evertalk.agent.session import OUTSIDE_KINDS, Outside
from evertalk.chat import ToolInputError
from evertalk.protocol import events
from evertalk.providers.base import Image
from evertalk.service.session import Session, error_frame
from evertalk.store.errors import StoreError

if TYPE_CHECKING:
    from evertalk.service.requests import Handler, Reply
    from evertalk.service.server import Service

APPEND_MOST: Final = 1_000
"""Messages one `append` request may carry: an import sends its history in batches."""


def view(service: Service, session: Session, frame: dict[str, Any]) -> Reply:
    return {"type": "view", "text": service.agent_open().chat.render_view()}


def zoom(service: Service, session: Session, frame: dict[str, Any]) -> Reply:
    chat = service.agent_open().chat
    try:
        return {"type": "zoom", "text": chat.zoom(_int(frame, "id"), _int(frame, "n"))}
    except (ToolInputError, StoreError) as error:
        return error_frame("bad_request", f"zoom: {error}")


def date(service: Service, session: Session, frame: dict[str, Any]) -> Reply:
    chat = service.agent_open().chat
    try:
        return {"type": "date", "text": chat.date(_int(frame, "id"))}
    except (ToolInputError, StoreError) as error:
        return error_frame("bad_request", f"date: {error}")


def append(service: Service, session: Session, frame: dict[str, Any]) -> Reply:
    """Log the messages now, a turn running or not: they are not part of it."""
    items = frame["messages"]
    if not isinstance(items, list) or not 0 < len(items) <= APPEND_MOST:
        raise ValueError(f"messages is a list of 1 to {APPEND_MOST:,}")
    messages = [_outside(item) for item in items]
    ids, skipped = service.agent_open().record(messages)
    if ids:
        first = messages[0] if len(messages) == 1 else None
        service.broadcast(
            events.Recorded(
                session.name, len(ids), first.kind if first else None, first.text if first else None
            )
        )
    return {"type": "appended", "ids": ids, "skipped": skipped}


HANDLERS: Final[dict[str, Handler]] = {"view": view, "zoom": zoom, "date": date, "append": append}


def _outside(item: object) -> Outside:
    if not isinstance(item, dict):
        raise TypeError("a message is an object")
    kind, text = item.get("kind"), item.get("text")
    found = next((known for known in OUTSIDE_KINDS if known == kind), None)
    if found is None:
        raise ValueError(f"kind is one of {', '.join(OUTSIDE_KINDS)}, not {kind!r}")
    if not isinstance(text, str) or not text.strip():
        raise ValueError("text is a string that is not empty")
    key, when = item.get("key"), item.get("date")
    if key is not None and (not isinstance(key, str) or not key):
        raise ValueError("key is a string that is not empty")
    moment = None
    if when is not None:
        moment = datetime.fromisoformat(str(when))
        if moment.tzinfo is None:
            raise ValueError(f"date {when!r} has no time zone")
    images = tuple(
        Image(str(image["media_type"]), str(image["data"])) for image in item.get("images") or ()
    )
    return Outside(found, text, moment, key, images)


def _int(frame: dict[str, Any], name: str) -> int:
    value = frame.get(name)
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"{name} is a whole number, not {value!r}")
    return value
