"""The errors of the PostgreSQL store; each message is one line, never holding a password."""

from __future__ import annotations

from evertalk.store.errors import StoreError


class PgStoreError(StoreError):
    """The database cannot be used as asked (unreachable, refused, of a newer schema)."""


class TransferError(PgStoreError):
    """A push or pull cannot go on: the two chats do not continue each other."""


class StaleTurn(PgStoreError):
    """An append made for a turn whose lock another session has taken since: refused."""


class Refused(PgStoreError):
    """The database can be reached, and evertalk will not use it as it is (its schema's owner
    could read the chat, say)."""
