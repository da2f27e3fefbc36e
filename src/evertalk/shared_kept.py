"""What a shared chat keeps of the database's answers, so that a service reads it without a
round trip on its event loop: the latest messages (`Kept.record`), and which idempotency keys
are logged (`Kept.logged`). Both are filled as the chat logs and folds, and read ahead in the
database's thread by whoever is about to need more (`SharedChat.aread_records`)."""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Iterable

from evertalk.store.records import MessageRecord

RECORDS_KEPT = 4096
"""Messages kept at most: the windows read the latest ones, which a turn has just logged."""
RECORDS_BYTES = 16 * 1024 * 1024
"""… and bytes of their texts."""
KEYS_KEPT = 8192
"""Keys kept at most: those of the messages held for a turn are the latest."""


class Kept:
    def __init__(self) -> None:
        self._records: OrderedDict[int, MessageRecord] = OrderedDict()
        self._bytes = 0
        self._keys: OrderedDict[str, bool] = OrderedDict()

    def record(self, i: int) -> MessageRecord | None:
        found = self._records.get(i)
        if found is not None:
            self._records.move_to_end(i)
        return found

    def missing(self, ids: Iterable[int]) -> list[int]:
        return [i for i in ids if i not in self._records]

    def keep(self, records: Iterable[MessageRecord]) -> None:
        for record in records:
            old = self._records.pop(record.i, None)
            if old is not None:
                self._bytes -= len(old.text)
            self._records[record.i] = record
            self._bytes += len(record.text)
            if record.key is not None:  # a page's is its message's, and `.n`
                key = record.key if record.page is None else record.key.rsplit(".", 1)[0]
                self.key(key, True)
        while len(self._records) > RECORDS_KEPT or self._bytes > RECORDS_BYTES:
            _, old = self._records.popitem(last=False)
            self._bytes -= len(old.text)

    def key(self, key: str, logged: bool) -> None:
        """What the database said of `key`: a key logged stays so; one not logged is told once
        (another machine may log it next)."""
        self._keys[key] = logged
        self._keys.move_to_end(key)
        if len(self._keys) > KEYS_KEPT:
            self._keys.popitem(last=False)

    def logged(self, key: str) -> bool | None:
        """Whether `key` is logged, as last read; None when not known."""
        found = self._keys.get(key)
        if found is False:
            del self._keys[key]
        return found
