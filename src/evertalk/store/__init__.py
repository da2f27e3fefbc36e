"""The chat folder on disk: the append-only log, the tree log, their index and the saved views.

`ChatStore` is the way in; the other modules each do one job for it.
"""

from evertalk.memory.core import SavedViews
from evertalk.memory.text import KINDS
from evertalk.memory.tree import BUILT, CUT, FREE, UNBUILT
from evertalk.store.chat_dir import ChatStore
from evertalk.store.errors import ChatLocked, CorruptLog, StoreError
from evertalk.store.index import Location
from evertalk.store.records import MessageRecord, NodeRecord

__all__ = [
    "BUILT",
    "CUT",
    "FREE",
    "KINDS",
    "UNBUILT",
    "ChatLocked",
    "ChatStore",
    "CorruptLog",
    "Location",
    "MessageRecord",
    "NodeRecord",
    "SavedViews",
    "StoreError",
]
