"""What the chat (`chat.Chat`) asks of the store under it: the store interface.

It was drawn from the two stores there are, the chat folder (`store.chat_dir.ChatStore`) and a
chat in PostgreSQL (`pgstore.storage.PgStorage`), and holds what both need: the log's pages,
the tree's nodes with their sizes and flags, the saved views, and what an owner must know to go
on (a failed write that wants a reopen, an index found stale). What only one store does (the
search index, forget, the folder's repairs) takes the folder store by its own name.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from pathlib import Path
from typing import Protocol

from evertalk.memory.core import SavedViews
from evertalk.store.message_log import NewMessage
from evertalk.store.records import MessageRecord, NodeRecord

NodeRow = tuple[int, int, str, int]
"""A node to store: level, index, text, flag."""


class ChatStorage(Protocol):
    """A chat's durable state, as the chat reads and writes it."""

    path: Path
    """The chat's folder on this machine: its services' files are kept there."""
    warnings: list[str]
    stale: str | None
    """Why T, sizes and flags read before may be out of date (the owner reads them again, then
    calls `resync`)."""

    @property
    def closed(self) -> bool: ...

    @property
    def message_count(self) -> int: ...

    @property
    def must_reopen(self) -> str | None:
        """Why the store takes no more changes until the chat is opened again, or None."""
        ...

    def append_pages(
        self, message: NewMessage, pages: Sequence[str], *, durable: bool = True
    ) -> list[int]: ...

    def append_nodes(self, nodes: Sequence[NodeRow]) -> None: ...

    def read_message(self, i: int) -> MessageRecord: ...

    def read_node(self, l: int, i: int) -> NodeRecord | None: ...  # noqa: E741

    def logged(self, key: str) -> bool: ...

    def node_sizes(self) -> list[array[int]]: ...

    def node_flags(self) -> list[bytearray]: ...

    def load_views(self) -> SavedViews | str | None: ...

    def save_views(self, saved: SavedViews) -> None: ...

    def save_views_unowned(self, saved: SavedViews, loaded: SavedViews | str | None) -> bool: ...

    def sync(self) -> None: ...

    def resync(self) -> None: ...

    def close(self) -> None: ...
