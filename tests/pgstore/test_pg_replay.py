"""The conformance replay (SPEC Appendix A) kept in both stores: the same records, the same views.

A seeded run of the memory core's events (appends, builds, failures) is persisted as the chat
persists it: each message into the file store (`ChatStore`) and into the database (`PgChat`),
each build or cut with the free parents it completes, and the free nodes an append builds. At
checkpoints the views are saved into both stores and loaded back. The two stores must then
hold the same message and node records, field for field, and give back the views the core
holds; the same event lines run through `evertalk memory replay`'s own function must show those
views too. No field is normalised: each store derives `size` from the text it holds, and the
writer's date, key, images, agent, page and failed flag go through both unchanged.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from evertalk.memory import Budget
from evertalk.memory.core import MemoryCore, SavedViews
from evertalk.memory.nodes import Node
from evertalk.memory.replay import replay
from evertalk.memory.text import KINDS, MESSAGE_LIMIT, split_text, utf8_len
from evertalk.memory.tree import BUILT, CUT, Built
from evertalk.pgstore.connect import Connection
from evertalk.pgstore.nodes import NodeRow
from evertalk.pgstore.pgchat import PgChat
from evertalk.store.chat_dir import ChatStore
from evertalk.store.message_log import NewMessage
from evertalk.store.records import NodeRecord
from evertalk.store.views import VIEW_NAME

SEED = 2024
EVENTS = 1_500
CHECKPOINT_EVERY = 300
SMALL = Budget(1_500, 700, 600, 300, 3)
"""The replay's flags as in the reference test: small enough that both views start and end
several batches within a few hundred messages (the command's default, 128,000 bytes, would not
start one in a run that takes seconds)."""

ZONE = timezone(timedelta(hours=2))
START = datetime(2026, 3, 1, 9, 0, tzinfo=ZONE)
SIZES = (0, 3, 40, 300, 505, 506, 507, 700, 2_000)
LETTERS = ("a", "é", "😀", "a\nb", "x\r\ny")
KIND_LIST = sorted(KINDS)


def _row(built: Built) -> NodeRow:
    return (built.level, built.index, built.text, built.flag)


def _record(row: NodeRow) -> NodeRecord:
    l, i, text, flag = row  # noqa: E741 - the spec's name for a level
    return NodeRecord(l, i, text, utf8_len(text), flag)


@dataclass
class Replay:
    """The core and the two stores it is persisted into, driven by one seeded stream."""

    core: MemoryCore
    files: ChatStore
    database: PgChat
    rnd: random.Random
    lines: list[str] = field(default_factory=list)
    """The events as `evertalk memory replay` reads them, one per core event."""
    nodes: dict[Node, NodeRow] = field(default_factory=dict)
    """Every node stored, as it was handed to the stores."""
    sent: list[tuple[str, str]] = field(default_factory=list)
    """(kind, text) of every page logged, by id."""
    changes: int = 0
    """The database changes expected: one per append, build, cut and copy of free nodes."""
    messages: int = 0

    # One step of the stream

    def step(self) -> None:
        roll = self.rnd.random()
        ready = self.core.ready()
        if ready and roll < 0.5:
            self.build(self.rnd.choice(ready))
        elif ready and roll < 0.58:
            failing = [node for node in ready if node in self.core.failures]
            self.fail(self.rnd.choice(failing or ready))
        elif roll < 0.62 and self.core.t and (waiting := list(self.core.tree.unbuilt(0))):
            self.build((0, self.rnd.choice(waiting)))  # a leaf beyond the window
        else:
            self.append()

    def append(self) -> None:
        n, rnd = self.messages, self.rnd
        self.messages += 1
        kind = rnd.choice(KIND_LIST)
        if rnd.random() < 0.02:
            text = (rnd.choice(LETTERS) + " ") * (MESSAGE_LIMIT // 2 + 1_000)  # two pages
        else:
            text = rnd.choice(LETTERS) * rnd.choice(SIZES)
        message = NewMessage(
            kind,
            text,
            key=f"m{n}" if n % 2 else None,
            images=["shot.png", f"{n}.jpg"] if kind == "user" and n % 5 == 0 else None,
            agent="helper" if kind == "work" else None,
            date=START + timedelta(minutes=37 * n),  # a day file every 39 messages or so
            failed=kind == "echo" and n % 3 == 0,
        )
        pages = split_text(text)
        first = self.core.t
        want = list(range(first, first + len(pages)))
        assert self.files.append_pages(message, pages) == want
        assert self.database.append_pages(message, pages) == want
        self.changes += 1
        built: list[Built] = []
        for page in pages:
            built += self.core.append(kind, page)
            self.lines.append(json.dumps({"op": "append", "kind": kind, "text": page}))
            self.sent.append((kind, page))
        self.store_free([_row(b) for b in built])

    def store_free(self, rows: list[NodeRow]) -> None:
        """The free nodes an append built: one write in each store."""
        if not rows:
            return
        self.files.append_nodes(rows)
        assert self.database.insert_nodes([_record(row) for row in rows]) == len(rows)
        self.changes += 1
        self.remember(rows)

    def build(self, node: Node) -> None:
        text = self.rnd.choice(["s", "€", "😀", "summary "]) * self.rnd.randint(1, 60)
        self.lines.append(json.dumps({"op": "build", "l": node[0], "i": node[1], "text": text}))
        free = [_row(b) for b in self.core.build(node, text)]
        rows = [(node[0], node[1], text, BUILT), *free]
        self.files.append_nodes(rows)
        assert self.database.build(node[0], node[1], text, free=free)
        self.changes += 1
        self.remember(rows)

    def fail(self, node: Node) -> None:
        self.lines.append(json.dumps({"op": "fail", "l": node[0], "i": node[1]}))
        built = self.core.fail(node)
        if not built:
            return  # a first or second failure: nothing to store
        rows = [_row(b) for b in built]
        assert rows[0][:2] == node and rows[0][3] == CUT
        self.files.append_nodes(rows)
        assert self.database.cut(node[0], node[1], rows[0][2], free=rows[1:])
        self.changes += 1
        self.remember(rows)

    def remember(self, rows: list[NodeRow]) -> None:
        for row in rows:
            assert (row[0], row[1]) not in self.nodes
            self.nodes[(row[0], row[1])] = row

    # Checks

    def checkpoint(self, checked: int) -> SavedViews:
        """Save the views into both stores, load them back, and compare the messages logged
        since message `checked`; the views saved."""
        saved = self.core.saved()
        self.files.save_views(saved)
        self.database.save_views(saved)
        assert self.files.load_views() == saved
        assert self.database.load_views() == saved
        assert self.database.views_body() == (self.files.path / VIEW_NAME).read_bytes()
        self.compare_messages(checked, self.core.t)
        built = self.database.built_nodes()
        assert built == set(self.nodes) == set(built_in(self.files))
        return saved

    def compare_messages(self, start: int, stop: int) -> None:
        assert self.files.message_count == self.database.message_count == stop
        batch = self.database.read_messages(start, stop)
        assert [r.i for r in batch] == list(range(start, stop))
        for i, together in zip(range(start, stop), batch, strict=True):
            in_files = self.files.read_message(i)
            in_database = self.database.read_message(i)
            assert in_files == in_database == together
            assert (in_files.kind, in_files.text) == self.sent[i]

    def compare_nodes(self) -> None:
        """Every node that exists, built or not, level by level."""
        tree = self.core.tree
        records: list[NodeRecord] = []
        for level in range(len(tree.flags)):
            for index in range(self.core.t >> level):
                in_files = self.files.read_node(level, index)
                assert in_files == self.database.read_node(level, index)
                assert self.files.node_flag(level, index) == tree.flag((level, index))
                row = self.nodes.get((level, index))
                assert in_files == (None if row is None else _record(row))
                if in_files is not None:
                    records.append(in_files)
        assert read_all_nodes(self.database) == records  # read_nodes: by level, then index
        assert self.database.node_count == len(self.nodes)


def built_in(store: ChatStore) -> Iterator[Node]:
    for level, flags in enumerate(store.node_flags()):
        for index, flag in enumerate(flags):
            if flag:
                yield (level, index)


def read_all_nodes(chat: PgChat) -> list[NodeRecord]:
    after, found = (-1, -1), []
    while page := chat.read_nodes(after, 500):
        found += page
        after = (page[-1].l, page[-1].i)
    return found


def views_of(state: dict[str, Any]) -> SavedViews:
    """The views a state line of the replay command shows, as the stores save them."""
    return SavedViews(
        state["t"],
        [(level, index) for level, index in state["view"]],
        [(level, index) for level, index in state["cview"]],
        state["shrinking"],
        state["cshrinking"],
        SMALL.sizes(),
    )


@pytest.fixture
def stores(
    tmp_path: Path, pg_connect: Callable[..., Connection]
) -> Iterator[tuple[ChatStore, PgChat]]:
    with ChatStore.open(tmp_path / "chat") as files:
        yield files, PgChat.open(pg_connect(), machine="replay")


def test_the_replay_persisted_in_both_stores(stores: tuple[ChatStore, PgChat]) -> None:
    files, database = stores
    run = Replay(MemoryCore(SMALL), files, database, random.Random(SEED))
    checkpoints: list[tuple[int, SavedViews]] = []
    checked, due = 0, CHECKPOINT_EVERY
    while len(run.lines) < EVENTS:
        run.step()
        if len(run.lines) >= due or len(run.lines) >= EVENTS:
            checkpoints.append((len(run.lines), run.checkpoint(checked)))
            checked, due = run.core.t, due + CHECKPOINT_EVERY
    run.compare_nodes()
    assert database.seq == run.changes and database.refused == 0

    # The same events through the conformance replay: no error, and the views persisted.
    states = [json.loads(line) for line in replay(run.lines, SMALL)]
    assert len(states) == len(run.lines)
    assert not [state for state in states if "error" in state]
    for count, saved in checkpoints:
        assert views_of(states[count - 1]) == saved
    assert [tuple(node) for node in states[-1]["ready"]] == run.core.ready()

    # The stream went where the test means it to: pages, cuts, free nodes, batches.
    flags = [row[3] for row in run.nodes.values()]
    assert len(checkpoints) >= EVENTS // CHECKPOINT_EVERY
    assert CUT in flags and BUILT in flags and len(set(flags)) == 3
    assert any(r.page is not None for r in database.read_messages(0, run.core.t))
    assert any(state["shrinking"] for state in states)
    assert any(state["cshrinking"] for state in states)
