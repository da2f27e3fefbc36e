"""Moving a chat between the file store and a database (SPEC §13: nothing locks a user in).

`push` copies a file chat into a database chat: the messages from the database's count on, in
batches (one transaction each), then the nodes the database lacks, then the views. Run again
after an interruption, it goes on where the last batch ended; run on a chat already copied, it
copies nothing. `pull` writes a database chat into a new chat folder.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from evertalk.memory.core import SavedViews
from evertalk.pgstore.errors import TransferError
from evertalk.pgstore.pgchat import PgChat
from evertalk.store.chat_dir import ChatStore
from evertalk.store.days import iso
from evertalk.store.message_log import NewMessage
from evertalk.store.records import MessageRecord, NodeRecord

BATCH = 1000

Progress = Callable[[str, int, int], None]
"""Called with a stage ("messages", "nodes"), how many are done and how many there are."""


def _quiet(stage: str, done: int, total: int) -> None:
    pass


@dataclass(frozen=True, slots=True)
class Copied:
    """What a transfer copied."""

    messages: int
    nodes: int
    views: bool


# Push


def push(
    source: Path, target: PgChat, *, progress: Progress = _quiet, batch: int = BATCH
) -> Copied:
    """Copy the file chat at `source` (`<home>/chat`) into `target`, from where it stands."""
    with ChatStore.open(source, create=False, readonly=True) as store:
        copied = _push_messages(store, target, progress, batch)
        built = _push_nodes(store, target, progress, batch)
        views = _push_views(store, target)
    return Copied(copied, built, views)


def _check_continues(store: ChatStore, target: PgChat, count: int) -> None:
    """Refuse a database chat that is not a beginning of this file chat."""
    if count > store.message_count:
        raise TransferError(
            f"the database chat holds {count} messages, the chat at {store.path}"
            f" {store.message_count}: it is another chat"
        )
    if count and target.read_message(count - 1) != store.read_message(count - 1):
        raise TransferError(
            f"message {count - 1} differs between the database chat and the chat at"
            f" {store.path}: it is another chat"
        )


def _push_messages(store: ChatStore, target: PgChat, progress: Progress, batch: int) -> int:
    start = target.message_count
    _check_continues(store, target, start)
    total, done = store.message_count, start
    while done < total:
        records = _whole_pages(store, done, min(done + batch, total))
        done = target.insert_records(records)
        progress("messages", done, total)
    return total - start


def _whole_pages(store: ChatStore, start: int, stop: int) -> list[MessageRecord]:
    """Messages start … stop - 1, and the rest of a long message's pages if it is cut there:
    the database never holds part of a message that the file chat holds whole."""
    records = [store.read_message(i) for i in range(start, stop)]
    while records[-1].page is not None and records[-1].page.part < records[-1].page.parts - 1:
        records.append(store.read_message(records[-1].i + 1))
    return records


def _built_in(store: ChatStore) -> Iterator[tuple[int, int]]:
    """The (l, i) of every node built in the file chat, level by level."""
    for level, flags in enumerate(store.node_flags()):
        for index, flag in enumerate(flags):
            if flag:
                yield level, index


def _push_nodes(store: ChatStore, target: PgChat, progress: Progress, batch: int) -> int:
    have = target.built_nodes()
    missing = [node for node in _built_in(store) if node not in have]
    copied = 0
    for start in range(0, len(missing), batch):
        records = [_node(store, node) for node in missing[start : start + batch]]
        copied += target.insert_nodes(records)
        progress("nodes", start + len(records), len(missing))
    return copied


def _node(store: ChatStore, node: tuple[int, int]) -> NodeRecord:
    record = store.read_node(*node)
    if record is None:  # its flag says built: the index and the tree disagree
        raise TransferError(f"node {node} of the chat at {store.path} cannot be read")
    return record


def _push_views(store: ChatStore, target: PgChat) -> bool:
    """Copy the views unless the database holds the same; whether they were copied. Unreadable
    views are not copied: the first open folds them again from the log, as it would here."""
    saved = store.load_views()
    if not isinstance(saved, SavedViews) or target.load_views() == saved:
        return False
    target.save_views(saved)
    return True


# Pull


def pull(
    source: PgChat, target: Path, *, progress: Progress = _quiet, batch: int = BATCH
) -> Copied:
    """Write the database chat `source` as a new chat folder at `target` (`<home>/chat`)."""
    if target.exists() and any(target.iterdir()):
        raise TransferError(f"{target} is not empty: a pull writes a new chat folder")
    with ChatStore.open(target) as store:
        copied = _pull_messages(source, store, progress, batch)
        built = _pull_nodes(source, store, progress, batch)
        views = _pull_views(source, store)
    return Copied(copied, built, views)


def _pull_messages(source: PgChat, store: ChatStore, progress: Progress, batch: int) -> int:
    total = source.message_count
    done = 0
    while done < total:
        records = _whole_messages(source, done, min(done + batch, total))
        for group in _messages(records):
            _write_message(store, group)
        store.sync()  # one fsync per batch: the pull is acknowledged as a whole
        done = store.message_count
        progress("messages", done, total)
    return done


def _whole_messages(source: PgChat, start: int, stop: int) -> list[MessageRecord]:
    """Messages start … stop - 1, and the rest of a long message's pages if it is cut there."""
    records = source.read_messages(start, stop)
    while records and records[-1].page is not None:
        last = records[-1]
        if last.page is None or last.page.part == last.page.parts - 1:
            break
        more = source.read_messages(last.i + 1, last.i + 2)
        if not more:
            break  # `_messages` names the message with pages missing
        records += more
    return records


def _messages(records: Sequence[MessageRecord]) -> Iterator[list[MessageRecord]]:
    """The records grouped by message: a long message's pages together."""
    group: list[MessageRecord] = []
    for record in records:
        group.append(record)
        if record.page is None or record.page.part == record.page.parts - 1:
            yield group
            group = []
    if group:
        raise TransferError(f"message {group[0].i} has pages missing in the database")


def _write_message(store: ChatStore, group: list[MessageRecord]) -> None:
    first = group[0]
    date = datetime.fromisoformat(first.date)
    if iso(date) != first.date:
        raise TransferError(f"message {first.i}'s date {first.date!r} is not of the log's form")
    key = first.key
    if key is not None and len(group) > 1:
        key = key.removesuffix(".0")  # the store names each page's key again
    images = list(first.images) if first.images is not None else None
    pages = [record.text for record in group]
    message = NewMessage(first.kind, "".join(pages), key, images, first.agent, date, first.failed)
    ids = store.append_pages(message, pages, durable=False)
    if ids[0] != first.i:
        raise TransferError(f"message {first.i} was written as {ids[0]}")


def _pull_nodes(source: PgChat, store: ChatStore, progress: Progress, batch: int) -> int:
    after, copied, total = (-1, -1), 0, source.node_count
    while records := source.read_nodes(after, batch):
        store.append_nodes([(r.l, r.i, r.text, r.flag) for r in records])
        copied += len(records)
        after = (records[-1].l, records[-1].i)
        progress("nodes", copied, total)
    return copied


def _pull_views(source: PgChat, store: ChatStore) -> bool:
    saved = source.load_views()
    if not isinstance(saved, SavedViews):
        return False
    store.save_views(saved)
    return True
