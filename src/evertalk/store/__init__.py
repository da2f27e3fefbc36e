"""The chat folder on disk: the append-only log, the tree log, their index and the saved views.

`ChatStore` (in chat_dir.py) is the way in; the other modules each do one job for it. Names
are loaded lazily, so that small users of one module (`secure`, `lock`) stay cheap to import.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from evertalk.memory.core import SavedViews
    from evertalk.store.chat_dir import ChatStore
    from evertalk.store.errors import ChatLocked, CorruptLog, StoreError
    from evertalk.store.index import Location
    from evertalk.store.records import MessageRecord, NodeRecord

_HOMES = {
    "ChatStore": "evertalk.store.chat_dir",
    "ChatLocked": "evertalk.store.errors",
    "CorruptLog": "evertalk.store.errors",
    "StoreError": "evertalk.store.errors",
    "Location": "evertalk.store.index",
    "MessageRecord": "evertalk.store.records",
    "NodeRecord": "evertalk.store.records",
    "SavedViews": "evertalk.memory.core",
}

__all__ = [
    "ChatLocked",
    "ChatStore",
    "CorruptLog",
    "Location",
    "MessageRecord",
    "NodeRecord",
    "SavedViews",
    "StoreError",
]


def __getattr__(name: str) -> Any:
    if name in _HOMES:
        return getattr(import_module(_HOMES[name]), name)
    raise AttributeError(f"module 'evertalk.store' has no attribute {name!r}")
