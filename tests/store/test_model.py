"""Random histories of appends, clean reopens, crashes, torn writes and lost indexes: after each,
the store answers exactly what a plain in-memory model of the log says (SPEC §1.3, §1.4, §2.2)."""

from __future__ import annotations

import shutil
import tempfile
from datetime import datetime, timedelta, timezone
from pathlib import Path

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule
from store_helpers import crash as _crash

from budget import examples
from evertalk.store import ChatStore, index
from evertalk.store.records import KINDS

TZ = timezone(timedelta(hours=1))
DAYS = [datetime(2026, 5, d, 8, 0, 0, tzinfo=TZ) for d in (3, 1, 2)]  # the clock goes back
texts = st.text(st.characters(exclude_categories=("Cs",)), max_size=40)


class StoreModel(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.old_every = index.CHECKPOINT_EVERY
        index.CHECKPOINT_EVERY = 3  # checkpoints, and appends past them, happen often
        self.root = Path(tempfile.mkdtemp())
        self.chat = self.root / "chat"
        self.store = ChatStore.open(self.chat)
        self.messages: list[tuple[str, str, str | None]] = []
        self.keys: dict[str, int] = {}
        self.nodes: dict[tuple[int, int], tuple[str, int]] = {}

    def teardown(self) -> None:
        self.store.close()
        shutil.rmtree(self.root)
        index.CHECKPOINT_EVERY = self.old_every

    @rule(
        kind=st.sampled_from(sorted(KINDS)),
        text=texts,
        day=st.integers(0, 2),
        key=st.none() | st.sampled_from(["a", "b", "c", "d"]),
    )
    def append_message(self, kind: str, text: str, day: int, key: str | None) -> None:
        i = self.store.append_message(kind, text, date=DAYS[day], key=key)
        if key is not None and key in self.keys:
            assert i == self.keys[key]
            return
        assert i == len(self.messages)
        self.messages.append((kind, text, key))
        if key is not None:
            self.keys[key] = i

    @precondition(lambda self: self.messages)
    @rule(data=st.data(), text=texts, day=st.integers(0, 2), flag=st.sampled_from([1, 2, 3]))
    def append_node(self, data: st.DataObject, text: str, day: int, flag: int) -> None:
        t = len(self.messages)
        level = data.draw(st.integers(0, t.bit_length() - 1))
        i = data.draw(st.integers(0, (t >> level) - 1))
        if (level, i) in self.nodes:
            return
        self.store.append_node(level, i, text, flag, date=DAYS[day])
        self.nodes[(level, i)] = (text, flag)

    def _reopen(self, rebuilding: bool = False) -> None:
        self.store = ChatStore.open(self.chat)
        # Only the garbage of torn writes earns warnings: the index is rebuilt only when lost.
        for warning in self.store.warnings:
            expected = ["torn", "not valid JSON"] + ["rebuilding the index"] * rebuilding
            assert any(part in warning for part in expected), warning

    @rule()
    def reopen(self) -> None:
        self.store.close()
        self._reopen()

    @rule()
    def crash_and_reopen(self) -> None:
        _crash(self.store)
        self._reopen()

    @rule(day=st.integers(0, 2), tree=st.booleans(), garbage=st.binary(min_size=1, max_size=30))
    def torn_write_then_crash(self, day: int, tree: bool, garbage: bytes) -> None:
        _crash(self.store)
        folder = self.chat / ("tree" if tree else "main")
        with (folder / f"2026-05-0{(3, 1, 2)[day]}.jsonl").open("ab") as file:
            file.write(garbage.replace(b"\n", b" "))
        self._reopen()

    @rule()
    def lose_the_index(self) -> None:
        self.store.close()
        shutil.rmtree(self.chat / "index")
        self._reopen(rebuilding=True)

    @rule()
    def read_only_view_agrees(self) -> None:
        self.store.checkpoint()
        with ChatStore.open(self.chat, readonly=True) as reader:
            self._check(reader)

    @invariant()
    def counts_agree(self) -> None:
        assert self.store.message_count == len(self.messages)

    @precondition(lambda self: len(self.messages) % 4 == 0)
    @invariant()
    def everything_agrees(self) -> None:
        self._check(self.store)

    def _check(self, store: ChatStore) -> None:
        t = len(self.messages)
        assert store.message_count == t
        for i, (kind, text, key) in enumerate(self.messages):
            record = store.read_message(i)
            assert (record.i, record.kind, record.text, record.key) == (i, kind, text, key)
        flags, sizes = store.node_flags(), store.node_sizes()
        assert [len(f) for f in flags] == [t >> level for level in range(t.bit_length())]
        assert [len(s) for s in sizes] == [len(f) for f in flags]
        for level, row in enumerate(flags):
            for i, flag in enumerate(row):
                expected = self.nodes.get((level, i))
                node = store.read_node(level, i)
                if expected is None:
                    assert flag == 0 and sizes[level][i] == 0 and node is None
                else:
                    text, want = expected
                    assert node is not None and (node.text, node.flag) == (text, want)
                    assert (flag, sizes[level][i]) == (want, len(text.encode()))


StoreModel.TestCase.settings = settings(
    max_examples=examples(60), stateful_step_count=40, deadline=None
)
TestStoreModel = StoreModel.TestCase
