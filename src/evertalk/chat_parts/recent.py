"""`Recent`: the last few values used, for what never changes once read (a built node's text)."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Hashable
from typing import Generic, TypeVar

_K = TypeVar("_K", bound=Hashable)
_V = TypeVar("_V")


class Recent(Generic[_K, _V]):
    """At most `most` values; the least recently used goes first."""

    def __init__(self, most: int) -> None:
        self.most = most
        self._kept: OrderedDict[_K, _V] = OrderedDict()

    def __contains__(self, key: object) -> bool:
        return key in self._kept

    def get(self, key: _K) -> _V | None:
        value = self._kept.get(key)
        if value is not None:
            self._kept.move_to_end(key)
        return value

    def put(self, key: _K, value: _V) -> None:
        kept = self._kept
        kept[key] = value
        if len(kept) > self.most:
            kept.popitem(last=False)
