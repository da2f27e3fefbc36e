"""`ChatState`: what a chat holds, and whether it takes changes (see `broken` in chat.py)."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from evertalk.chat_parts.recent import Recent
from evertalk.memory import MemoryCore, Node
from evertalk.memory.core import SavedViews
from evertalk.store.chat_dir import ChatStore
from evertalk.store.closing import Closing
from evertalk.store.errors import StoreError
from evertalk.store.message_log import MessageLog
from evertalk.store.storage import ChatStorage
from evertalk.store.views import ViewCheckpoints

if TYPE_CHECKING:
    from evertalk.store.search_index import SearchIndex

# Built nodes' texts and rendered lines kept: a built node never changes, and a view at a million
# messages has a few hundred lines (its cview and the view fitted for a turn reuse most of them).
TEXTS_KEPT = 4096

REOPEN_ADVICE = (
    "the chat takes no changes until it is reopened, which the service does by itself once "
    "the disk takes writes again"
)


def broken_error(reason: str) -> StoreError:
    """The error of a change to a chat that must be reopened first (Chat.broken)."""
    return StoreError(f"{reason}; {REOPEN_ADVICE}")


class ChatState(MessageLog, Closing):
    """The store, the core and what the chat keeps beside them; the parts build on it."""

    def __init__(self, store: ChatStorage, core: MemoryCore, readonly: bool) -> None:
        self.store = store
        self.core = core
        self.readonly = readonly
        self.warnings: list[str] = list(store.warnings)
        self._broken: str | None = None  # why the core and the disk may differ (see chat.py)
        self.checkpoints = ViewCheckpoints(time.monotonic)
        self._texts: Recent[Node, str] = Recent(TEXTS_KEPT)
        self._lines: Recent[Node, str] = Recent(TEXTS_KEPT)
        self._batched = False  # inside `one_sync`
        self.search_enabled = False  # `[memory] search = true`: the `search` tool is offered
        self.search: SearchIndex | None = None
        """The search index kept up to date as records are logged (see keep_search_index)."""
        self._folded: tuple[SavedViews | str | None] | None = None
        """For a reader that folded the views: (what view.json held then,), until it saves
        them; None when there is nothing to save (or it may not)."""

    @property
    def files(self) -> ChatStore:
        """The chat folder's store, for what only it does (search, forget, repairs); a
        StoreError for a chat kept elsewhere."""
        store = self.store
        if not isinstance(store, ChatStore):
            raise StoreError(f"{self.kept_where}: this works on a chat kept in files only")
        return store

    @property
    def kept_where(self) -> str:
        """Where the chat is kept, as said to the user."""
        return f"the chat at {self.store.path}"

    @property
    def folder(self) -> Path:
        """The chat's folder, where the services beside it keep their files."""
        return self.store.path

    @property
    def broken(self) -> str | None:
        """Why the chat takes no more changes until it is reopened (see chat.py), or None."""
        return self._broken or self.store.must_reopen

    def _writable(self) -> None:
        if self.readonly:
            raise StoreError("this chat was opened read-only")
        if self.broken is not None:
            raise broken_error(self.broken)

    @contextmanager
    def _stops_on_failure(self) -> Iterator[None]:
        """A store write that fails and leaves the store wanting a reopen says what comes next."""
        try:
            yield
        except StoreError as error:
            if self.store.must_reopen is None:
                raise
            raise StoreError(f"{error}; {REOPEN_ADVICE}") from None
