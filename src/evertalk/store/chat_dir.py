"""The chat folder on disk: the one object the rest of the program uses to reach the log."""

from __future__ import annotations

import os
import sqlite3
from array import array
from collections.abc import Callable, Sequence
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from evertalk.memory.core import SavedViews
from evertalk.memory.tree import FREE
from evertalk.store import views
from evertalk.store.checkpoint import INDEX_DIR, MAIN, REBUILDING, TREE, behind, log_sizes
from evertalk.store.closing import Closing
from evertalk.store.days import as_local, day_file_name, iso, local_now
from evertalk.store.errors import ChatLocked, IndexMismatch, StoreError, describe
from evertalk.store.index import Index, Location
from evertalk.store.index_files import StaleIndex
from evertalk.store.line_files import Appender, Reader, end_torn_line, parse_object
from evertalk.store.loader import open_index
from evertalk.store.lock import ChatLock
from evertalk.store.message_log import NewMessage, PageStore, page_keys
from evertalk.store.meta import META_NAME
from evertalk.store.records import (
    MessageRecord,
    NodeRecord,
    Page,
    decode_message,
    decode_node,
    encode_message,
    encode_node,
)
from evertalk.store.secure import make_dir

if TYPE_CHECKING:
    from evertalk.store.rewrite import Rewrite

_T = TypeVar("_T")


def _check_writable(chat_dir: Path) -> None:
    """Fail at open, in one line, rather than at the first append deep inside a turn."""
    for folder in (chat_dir, chat_dir / MAIN, chat_dir / TREE, chat_dir / INDEX_DIR):
        if folder.exists() and not os.access(folder, os.W_OK | os.X_OK):
            raise StoreError(f"cannot write to {folder}: the chat can only be opened read-only")


class ChatStore(Closing, PageStore):
    """The chat folder: log, tree, index and saved views, owned by this process unless read-only.

    A record counts only once its append has returned, fsynced (SPEC §1.3); every append also
    updates the index, which is checkpointed every 1000 appends and on close. The index is
    derived data: a read that finds it out of step with the log rebuilds it from the log, once,
    and goes on (see `stale`). One thread at a time: the store has no locks of its own.
    """

    def __init__(
        self,
        path: Path,
        index: Index,
        terms: dict[str, bytes],
        lock: ChatLock | None,
        warnings: list[str],
    ) -> None:
        self.path = path
        self.warnings = warnings
        self.readonly = lock is None
        self._index = index
        self._terms = terms  # per log file, what its next append must write first (SPEC §1.4)
        self._lock = lock
        self._appender = Appender()
        self._reader = Reader(path)
        self._closed = False
        self._failed: str | None = None
        self._rebuilt = False  # the index was rebuilt from the log after a mismatch
        self.stale: str | None = None
        """Why T, sizes and flags taken from the store before may be out of date (see resync)."""

    @classmethod
    def open(cls, chat_dir: Path, *, create: bool = True, readonly: bool = False) -> ChatStore:
        """Open the chat at `chat_dir` (`<home>/chat`), taking its lock unless `readonly`.

        A read-only open writes nothing at all, the index included: what the index lacks is
        read into memory. Problems that do not stop the open are in `warnings`.
        """
        chat_dir = Path(chat_dir)
        warnings: list[str] = []
        lock: ChatLock | None = None
        try:
            if not readonly and create:
                make_dir(chat_dir)
            if not chat_dir.is_dir():
                raise StoreError(f"there is no chat at {chat_dir}")
            if not readonly:
                _check_writable(chat_dir)
                lock = ChatLock.acquire(chat_dir)
                for folder in (chat_dir / MAIN, chat_dir / TREE):
                    make_dir(folder)
            index, terms = open_index(chat_dir, readonly=readonly, warnings=warnings)
        except BaseException as error:
            if lock is not None:
                lock.release()
            if isinstance(error, OSError):
                raise StoreError(f"cannot open the chat at {chat_dir}: {describe(error)}") from None
            if isinstance(error, sqlite3.Error):
                raise StoreError(f"cannot open the index of {chat_dir}: {error}") from None
            raise
        store = cls(chat_dir, index, terms, lock, warnings)
        if lock is not None:
            store._end_torn_tree_lines()
        return store

    def _end_torn_tree_lines(self) -> None:
        """End each tree file's torn last line now, as its next append would (SPEC §1.4: its
        bytes stay), and checkpoint: a node line cut short by a full disk is warned about at
        this open alone, though no node may be written to that day's file again. A line that
        cannot be ended now is left to that next append. Message files keep the rule as it is
        written: today's next message ends the line."""
        ended = False
        for name, term in list(self._terms.items()):
            if not name.startswith(TREE + "/"):
                continue
            try:
                end = end_torn_line(self.path / name, term)
            except OSError:
                continue
            del self._terms[name]
            self._index.ended_torn_line(name, end)
            ended = True
        if ended:
            try:
                self.checkpoint()
            except (StoreError, OSError, sqlite3.Error) as error:
                self.warnings.append(f"the index of {self.path} was not checkpointed: {error}")

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def message_count(self) -> int:
        """T: the number of messages logged."""
        return self._index.message_count

    @property
    def must_reopen(self) -> str | None:
        """Why this store takes no more appends until the chat is opened again (a failed write,
        an index that could not follow the log), or None."""
        return self._failed or self._appender.failed or self.stale

    # Appends

    def _writable(self) -> None:
        if self._closed:
            raise StoreError(f"the chat at {self.path} is closed")
        if self.readonly:
            raise StoreError(f"the chat at {self.path} was opened read-only")
        if self._failed is not None:
            raise StoreError(f"the chat at {self.path} must be reopened: {self._failed}")
        if self.stale is not None:
            raise StoreError(f"the chat at {self.path} must be reopened: {self.stale}")

    def _indexed(self, update: Callable[[], _T]) -> _T:
        """Run an index update for a line already in the log.

        If it fails, the log and the index disagree on T; only a reopen, which scans the log's
        tail, can tell the next id, so appends stop until then.
        """
        try:
            result = update()
        except (OSError, sqlite3.Error) as error:
            self._failed = f"the index could not be updated ({error})"
            raise StoreError(f"the chat at {self.path}: {self._failed}") from None
        if self._index.checkpoint_due:
            try:
                self._appender.sync()  # a checkpoint vouches for every line it has seen
                self._index.checkpoint()
            except (StoreError, OSError, sqlite3.Error) as error:
                # The line is logged; a late checkpoint only means a longer scan at the next open.
                self.warnings.append(f"the index of {self.path} was not checkpointed: {error}")
        return result

    def append_pages(
        self, message: NewMessage, pages: Sequence[str], *, durable: bool = True
    ) -> list[int]:
        """Log `message` as consecutive pages, all in one write and one fsync, so that a crash
        keeps all of them or none (SPEC §1.6); returns their ids. `durable` False leaves the
        fsync to `sync`, for a batch that is acknowledged as a whole."""
        self._writable()
        count = len(pages)
        if count == 0:
            raise ValueError("a message has at least one page")
        keys = page_keys(message.key, count)
        logged = self._logged(message.key) if message.key is not None else None
        if logged is not None:
            return logged
        when = as_local(message.date) if message.date is not None else local_now()
        kind, images = message.kind, message.images
        first = self._index.message_count
        lines = [
            encode_message(
                first + n,
                kind,
                page,
                iso(when),
                keys[n],
                images if n == 0 else None,
                message.agent,
                Page(n, count) if count > 1 else None,
                message.failed,
            )
            for n, page in enumerate(pages)
        ]
        name = f"{MAIN}/{day_file_name(when)}"
        prefix = self._terms.get(name, b"")
        spans = self._appender.append_lines(self.path / name, lines, prefix, durable=durable)
        self._terms.pop(name, None)
        extra = 1 if prefix else 0
        return self._indexed(lambda: self._index.add_messages(name, spans, extra, keys))

    def logged(self, key: str) -> bool:
        """Whether a message was logged with this idempotency key."""
        return self._logged(key) is not None

    def _logged(self, key: str) -> list[int] | None:
        """The ids of the message logged with `key`, whether it took one page or several (a
        re-sent message may split otherwise, say after a change of text)."""
        for candidate in (key, f"{key}.0"):
            i = self._index.key(candidate)
            if i is not None:
                page = self.read_message(i).page
                return list(range(i, i + (page.parts if page is not None else 1)))
        return None

    def append_node(
        self,
        l: int,  # noqa: E741 - the spec's name for a level
        i: int,
        text: str,
        flag: int,
        *,
        date: datetime | None = None,
    ) -> None:
        """Log node (l, i) as built (flag 1: by the model, 2: free, 3: cut)."""
        self.append_nodes([(l, i, text, flag)], date=date)

    def append_nodes(
        self, nodes: Sequence[tuple[int, int, str, int]], *, date: datetime | None = None
    ) -> None:
        """Log nodes (l, i, text, flag) as built, in one write and one fsync: a build and the
        free parents it completes are one durable step, not one per node. Free nodes alone are
        not synced: an open builds a lost one again (they are made durable before an index
        checkpoint names them)."""
        self._writable()
        if not nodes:
            return
        seen: set[tuple[int, int]] = set()
        for l, i, _, _ in nodes:  # noqa: E741
            if l < 0 or i < 0 or l > 62 or (i + 1) << l > self.message_count:
                raise ValueError(f"node ({l}, {i}) does not exist yet")
            if self._index.node_flag(l, i) or (l, i) in seen:
                raise ValueError(f"node ({l}, {i}) is already built")
            seen.add((l, i))
        lines = [encode_node(l, i, text, flag) for l, i, text, flag in nodes]  # noqa: E741
        when = as_local(date) if date is not None else local_now()
        name = f"{TREE}/{day_file_name(when)}"
        prefix = self._terms.get(name, b"")
        durable = any(flag != FREE for _, _, _, flag in nodes)
        spans = self._appender.append_lines(self.path / name, lines, prefix, durable=durable)
        self._terms.pop(name, None)

        def index() -> None:
            for n, ((l, i, text, flag), (offset, length)) in enumerate(  # noqa: E741
                zip(nodes, spans, strict=True)
            ):
                where = (name, offset, length, 1 + (n == 0 and bool(prefix)))
                self._index.add_node((l, i), len(text.encode("utf-8")), flag, where)

        self._indexed(index)

    # Reads

    def read_message(self, i: int) -> MessageRecord:
        """Message i, with one read of its location and one of its line."""
        if not 0 <= i < self.message_count:
            raise IndexError(f"there is no message {i} (T = {self.message_count})")
        try:
            return self._message(i)
        except StaleIndex as error:
            return self._read_again(error, "message {}", self._message, i)

    def read_node(self, l: int, i: int) -> NodeRecord | None:  # noqa: E741
        """Node (l, i), or None when it is not built."""
        try:
            return self._node(l, i)
        except StaleIndex as error:
            return self._read_again(error, "node ({}, {})", self._node, l, i)

    def _message(self, i: int) -> MessageRecord:
        if not 0 <= i < self.message_count:  # checked before: only a rebuild that found less
            raise StoreError(f"message {i} is not in the log any more (T = {self.message_count})")
        location = self._index.message_location(i)
        record = decode_message(self._read(location)) if location is not None else None
        if record is None or record.i != i:
            raise StaleIndex("the line there is not that message")
        return record

    def _node(self, l: int, i: int) -> NodeRecord | None:  # noqa: E741
        found = self._index.node(l, i)
        if found is None:
            return None
        location, flag, size = found
        record = decode_node(self._read(location))
        if record is None or (record.l, record.i, record.flag, record.size) != (l, i, flag, size):
            raise StaleIndex("the line there is not that node, as the index has it")
        return record

    def _read(self, location: Location) -> dict[str, object]:
        try:
            raw = self._reader.read(location.file, location.offset, location.length)
        except OSError as error:
            raise StoreError(f"cannot read the log: {describe(error)}") from None
        parsed = parse_object(raw[:-1]) if raw.endswith(b"\n") else None
        return parsed if isinstance(parsed, dict) else {}

    def _read_again(self, error: StaleIndex, label: str, read: Callable[..., _T], *args: int) -> _T:
        """After `read(*args)` found that the index does not match the log: rebuild the index
        from the log, as the next open would, and read once more. `label` names what is read,
        formatted with `args` only now, since reads are hot."""
        what = label.format(*args)
        self._rebuild(f"{what}: {error}")
        try:
            return read(*args)
        except StaleIndex as again:
            raise self._mismatch(f"{what}: {again}") from None

    def _rebuild(self, why: str) -> None:
        if self._rebuilt or self._failed is not None or self._closed:
            raise self._mismatch(why)
        self._rebuilt = True
        before = (self.message_count, self.node_sizes(), self.node_flags())
        # The rebuild replaces keys.db and drops its journal: close the old connection first,
        # so that it has no transaction left to roll back into the new file.
        self._index.keys.close()
        try:
            index, terms = open_index(
                self.path,
                readonly=self.readonly,
                warnings=self.warnings,
                rebuild=f"it does not match the log at {why}",
            )
        except (StoreError, OSError, sqlite3.Error) as error:
            self._invalidate(f"the index does not match the log at {why}")
            raise StoreError(f"the index of {self.path} cannot be rebuilt: {error}") from None
        old, self._index, self._terms = self._index, index, terms
        old.close(checkpoint=False)
        if (self.message_count, self.node_sizes(), self.node_flags()) != before:
            self.stale = f"its index was rebuilt from the log ({why})"

    def invalidate(self, reason: str) -> None:
        """The log is about to be rewritten under the index (a forget, SPEC §12): see below."""
        self._invalidate(reason)

    def rewrote(self, rewrites: Sequence[Rewrite]) -> None:
        """After a forget rewrote these files under an index it invalidated first: follow them
        and checkpoint, so that the next open trusts the index again rather than building it
        from the whole log. The store still takes no more changes (the chat opens again)."""
        self._reader.close()  # its descriptors are of the files replaced
        for rewrite in rewrites:
            self._index.rewrote(rewrite)
        try:
            self._appender.sync()  # the checkpoint vouches for every line it has seen
            self._index.checkpoint()
        except (StoreError, OSError, sqlite3.Error) as error:
            # meta.json is gone: the next open builds the index from the log, losing nothing
            self.warnings.append(f"the index of {self.path} was not checkpointed: {error}")

    def _invalidate(self, reason: str) -> None:
        """Stop trusting the index: no more appends or checkpoints here, a rebuild at next open."""
        self._failed = reason
        if not self.readonly:
            (self.path / INDEX_DIR / META_NAME).unlink(missing_ok=True)

    def _mismatch(self, what: str) -> IndexMismatch:
        self._invalidate(f"the index does not match the log at {what}")
        return IndexMismatch(
            f"the index of {self.path} does not match the log at {what}; "
            "it is rebuilt from the log at the next start"
        )

    def resync(self) -> None:
        """The caller took T, sizes and flags again after a rebuild: appends may go on."""
        self.stale = None

    def node_flag(self, l: int, i: int) -> int:  # noqa: E741
        """0 unbuilt, 1 built by the model, 2 free, 3 cut."""
        return self._index.node_flag(l, i)

    def node_sizes(self) -> list[array[int]]:
        """Per level 0 … max, `T >> level` sizes in bytes (0 for unbuilt nodes)."""
        return self._index.node_sizes()

    def node_flags(self) -> list[bytearray]:
        """Per level 0 … max, `T >> level` flags (0 for unbuilt nodes)."""
        return self._index.node_flags()

    def message_location(self, i: int) -> Location | None:
        return self._index.message_location(i)

    def node_location(self, l: int, i: int) -> Location | None:  # noqa: E741
        return self._index.node_location(l, i)

    # Views

    def load_views(self) -> SavedViews | str | None:
        """The saved views; None when missing; an error string when unreadable (warn, fold)."""
        return views.load_views(self.path)

    def save_views(self, saved: SavedViews) -> None:
        """Replace view.json atomically (SPEC §3.6)."""
        self._writable()
        # No sync of the free nodes it names first: an open builds a lost one again.
        try:
            views.save_views(self.path, saved)
        except OSError as error:
            raise StoreError(f"cannot save the views: {describe(error)}") from None

    def save_views_unowned(self, saved: SavedViews, loaded: SavedViews | str | None) -> bool:
        """For a reader that folded the views: save them as the owner would have, under the
        chat's lock taken at once, so that the next command loads them rather than folding the
        whole chat again (SPEC §3.6). Only while the log and view.json are as this reader found
        them (`loaded`: what it read there), and held nothing to warn about (damage is the
        owner's to report, as for the index); whether they were saved."""
        if any(not warning.startswith(REBUILDING) for warning in self.warnings):
            return False
        for folder in (self.path, self.path / INDEX_DIR):
            if not os.access(folder, os.W_OK | os.X_OK):
                return False  # a chat this user may read but not write
        try:
            lock = ChatLock.acquire(self.path)
        except (ChatLocked, OSError):
            return False  # an owner's: it saves its own views
        try:
            if behind(self._index.meta, log_sizes(self.path)) or self.load_views() != loaded:
                return False  # another program wrote meanwhile: these views are not its own
            views.save_views(self.path, saved)
        except OSError:
            return False  # the next command folds again; nothing is lost
        finally:
            lock.release()
        return True

    # Closing

    def checkpoint(self) -> None:
        """Save the index's checkpoint now (it is also saved every 1000 appends, and on close
        when enough is new)."""
        if self._failed is None:  # else it would vouch for an index the log does not match
            self._appender.sync()
            self._index.checkpoint()

    def sync(self) -> None:
        """Make every line written so far durable (one fsync per file written since)."""
        self._appender.sync()

    def _synced(self) -> bool:
        """Whether every line written is durable now (a checkpoint vouches for them all)."""
        try:
            self._appender.sync()
        except StoreError:  # an append failed: the log's tail is for the next open to scan
            return False
        return True

    def close(self) -> None:
        """Checkpoint the index, close every file and release the lock (idempotent)."""
        if self._closed:
            return
        self._closed = True
        try:
            # After a failed update the checkpoint would vouch for a state the log does not
            # match; without it, the next open scans from the last good one.
            worth = self._index.checkpoint_worth_closing
            self._index.close(checkpoint=worth and self._failed is None and self._synced())
        except (OSError, sqlite3.Error) as error:
            raise StoreError(f"cannot save the index of {self.path}: {error}") from None
        finally:
            self._appender.close()
            self._reader.close()
            if self._lock is not None:
                self._lock.release()
