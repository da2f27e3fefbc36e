"""`ChatHooks`: what the service awaits, and what other machines would change, as a chat kept in
files does them: its own calls, at once (a chat in a database overrides them, shared_chat.py).

A chat kept in a database does its I/O in a thread of its own, and the service awaits these
instead of the calls they are named after, or before the calls that read. A chat kept in files
does what it did: its writes are a local append and fsync."""

from __future__ import annotations

from collections.abc import Callable, Iterable

from evertalk.chat_parts.writing import ChatWriting
from evertalk.memory import Node
from evertalk.store.message_log import MessageLog, NewMessage


class ChatHooks(ChatWriting):
    """The awaited calls, the reads ahead, and the other machines' side (a chat kept in files
    has no other machines)."""

    async def alog_message(self, message: NewMessage) -> list[int]:
        """`log_message`, awaited."""
        return self.log_message(message)

    async def abuild(self, node: Node, text: str) -> None:
        self.build(node, text)

    async def acut(self, node: Node) -> None:
        self.cut(node)

    async def afail(self, node: Node) -> None:
        self.fail(node)

    async def aclaim(self, node: Node) -> bool:
        return self.claim(node)

    async def afollow(self) -> list[int]:
        return self.follow()

    async def aready(self, key: str | None = None) -> None:
        """Before a message is held: the database, if any, is reachable, and `logged(key)`
        will answer without it."""
        del key

    async def aread_records(self, start: int, stop: int) -> None:
        """Read messages start … stop − 1 ahead, for `record` to find them."""
        del start, stop

    async def aread_texts(self, nodes: Iterable[Node]) -> None:
        """Read the texts of these nodes ahead, for `text_of` and `line_of` to find them."""
        del nodes

    async def aread_inputs(self, node: Node) -> None:
        """Read ahead what a compaction of `node` reads: its input and its context."""
        del node

    async def aread_zoom(self, start: int, count: int) -> None:
        """Read ahead what `zoom(start, count)` reads."""
        del start, count

    async def alogged_keys(self, keys: Iterable[str]) -> None:
        """Look these keys up ahead, for `logged` to answer."""
        del keys

    def turn_log(self) -> MessageLog:
        """The log a turn writes to."""
        return self

    async def flushed(self) -> None:
        """Once what the turns wrote to `turn_log` is logged."""

    def reachable(self) -> None:
        """Nothing; for a chat in a database, a StoreError when it was found unreachable
        last and has not been reached since."""

    def follow(self) -> list[int]:
        """Fold in what other machines changed since; the ids of the messages they logged."""
        return []

    def usage_copy(self) -> Callable[[str], None] | None:
        """Where the ledger's records go besides the home's file (None: nowhere)."""
        return None

    def claim(self, node: Node) -> bool:
        """Whether this machine may build `node` now (no other builds it)."""
        del node
        return True

    def release(self, node: Node) -> None:
        """This machine does not build `node` after all (its call failed)."""
        del node
