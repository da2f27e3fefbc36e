"""The chat: the one place that glues the durable store to the pure memory core.

Every change goes to disk first (append + fsync) and reaches the core only once it is
durable; nodes the core builds by itself are written before the views that may name them.

Those nodes (free parents, cut nodes) are the one exception to "disk first": the core makes them
as it takes an event, and they are written right after. If that write fails, the core holds
nodes the disk does not, and anything built on them could name lines that a restart would not
find. So the Chat stops there: every later change raises a StoreError asking for a reopen, which
rebuilds the state from what is on disk (and builds the lost free nodes again). A failed append
of the store's own (a full disk) stops it the same way: only a reopen, which scans the log's
tail, knows what got in. `broken` says why; the service reopens a broken chat by itself once
the disk takes writes again (or at the next message, if that comes first).

Free nodes are derived (an open builds a lost one again), so their write is not synced on its
own: a message or a compactor's line costs one fsync with the free nodes it completes. The
views are derived too: `view.json` is saved at checkpoints (see `ViewCheckpoints`), not at every
message, and an open folds forward from it (SPEC §3.6 step 3).

`Chat` is made of parts, one job each (chat_parts/): this module is its front door.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from evertalk.chat_parts.hooks import ChatHooks
from evertalk.chat_parts.opening import ChatOpening
from evertalk.chat_parts.reading import ToolInputError, format_date
from evertalk.chat_parts.state import broken_error
from evertalk.chat_parts.view import ChatView, Status
from evertalk.memory import Budget
from evertalk.memory.core import SavedViews
from evertalk.memory.tree import CUT, FREE
from evertalk.store.chat_dir import ChatStore


class Chat(ChatOpening, ChatHooks, ChatView):
    """The chat kept in files (`SharedChat` overrides what differs for one in a database): its
    parts write and open it, answer the awaited calls, and read it and its memory's view."""

    @classmethod
    def open(
        cls,
        chat_dir: Path,
        *,
        readonly: bool = False,
        budget: Budget | None = None,
        search: bool = False,
    ) -> Chat:
        store = ChatStore.open(chat_dir, create=not readonly, readonly=readonly)
        return cls.over(store, readonly=readonly, budget=budget, search=search)


@contextmanager
def opened(chat_dir: Path, *, readonly: bool = False) -> Iterator[Chat]:
    chat = Chat.open(chat_dir, readonly=readonly)
    try:
        yield chat
    finally:
        chat.close()


__all__ = [
    "CUT",
    "FREE",
    "Chat",
    "SavedViews",
    "Status",
    "ToolInputError",
    "broken_error",
    "format_date",
]
