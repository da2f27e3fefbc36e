"""What a client's request will read of a chat kept in a database, read first in the chat's
database thread (`read_ahead`), so that the request's handler, which runs on the service's event
loop, finds it at hand and no window or stream waits for the database meanwhile. Messages to
log (`append`) are logged here, and the handler answers with their ids. A chat kept in files
reads nothing ahead: its methods for it do nothing.

Should the database not answer, nothing is read, and the handler says why (a message is not
held; a read of a message not kept fails at once, `SharedChat.record`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import msgspec

from evertalk.protocol import requests
from evertalk.slash import RETRY
from evertalk.store.errors import StoreError

if TYPE_CHECKING:
    from evertalk.agent.session import Agent

RECORDS_MOST = 2_000
"""As many messages as one `records` request returns at most (service/requests.py)."""
RETRY_READS = 64
"""The latest messages a retry reads back over, looking for the one left unanswered."""


async def read_ahead(agent: Agent | None, request: object) -> None:
    """Read what `request` will need of `agent`'s chat (nothing without an agent)."""
    if agent is None:
        return
    chat = agent.chat
    try:
        if isinstance(request, requests.Send):
            key = request.key if isinstance(request.key, str) and request.key else None
            await chat.aready(key)
        elif isinstance(request, requests.GetRecords):
            await chat.aread_records(*_records_span(request, chat.t))
        elif isinstance(request, requests.GetZoom):
            await chat.aread_zoom(request.id, request.n)
        elif isinstance(request, requests.GetDate):
            await chat.aread_records(request.id, request.id + 1)
        elif isinstance(request, (requests.GetView, requests.Command)):
            await chat.aread_texts(chat.core.view)
            if isinstance(request, requests.Command) and request.name == RETRY.name:
                await chat.aread_records(max(0, chat.t - RETRY_READS), chat.t)
        elif isinstance(request, requests.Retry):
            await chat.aread_records(max(0, chat.t - RETRY_READS), chat.t)
        elif isinstance(request, requests.Append) and agent.sharing is not None:
            await _record(agent, request)
    except StoreError:
        return  # the handler meets it, and says it


async def _record(agent: Agent, request: requests.Append) -> None:
    """The messages logged now, in the chat's thread; the handler's `record` of the same
    messages, next, answers with what was logged (`Agent.record_ahead`)."""
    from evertalk.service.memory_requests import APPEND_MOST, outside_message

    if not 0 < len(request.messages) <= APPEND_MOST:
        return  # the handler refuses them
    try:
        messages = [outside_message(item) for item in request.messages]
    except ValueError:
        return  # as this
    await agent.record_ahead(messages)


def _records_span(request: requests.GetRecords, t: int) -> tuple[int, int]:
    """The ids a `records` request may read, as its handler reads them."""
    end = t if request.end is msgspec.UNSET else min(t, request.end)
    if request.last is not msgspec.UNSET:
        scan = min(request.last, RECORDS_MOST) if request.scan is msgspec.UNSET else request.scan
        return max(0, end - scan), end
    start = 0 if request.start is msgspec.UNSET else request.start
    return start, min(end, start + RECORDS_MOST)
