"""The compactor service against the in-process Anthropic fake, through the real SDK (SPEC §4).

Nothing of ours is mocked: a real Chat on disk, the real AnthropicProvider (and prefix gate), the
real usage ledger. The fake answers as the Messages API does and records every request, so the
checks read the fake's request log, the tree files and the ledger, not the service's own state.
"""

from __future__ import annotations

import json
import random
import re
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from starlette.types import ASGIApp

from evertalk.chat import Chat
from evertalk.compactor.service import Compactor, CompactorSettings
from evertalk.ledger import Ledger, ledger_path, read_records
from evertalk.memory import Budget, Node
from evertalk.memory.text import PLACEHOLDER
from evertalk.prompts import TOOLS, system_text
from evertalk.providers.base import Provider, ProviderError
from evertalk.providers.gate import GatedProvider, PrefixGate
from evertalk.providers.layout import prefix_keys
from fakes import (
    AnthropicFake,
    Call,
    Fail,
    FakeClock,
    InFlight,
    Script,
    constant,
    cut,
    empty,
    fail,
    fenced,
    never_shortens,
    sequence,
    sized_line,
    slow,
    summarizer,
    thinking_only,
    with_head,
)
from fakes.sdk_providers import provider_for
from polling import until as until

KEY = "sk-ant-api03-compactor-tests-SECRET-7f3a9c"
MODEL = "claude-haiku-4-5"
SMALL = Budget(ceiling=16_000, floor=8_000, cceiling=4_000, cfloor=2_000)
"""Small views: batches come often and trees get deep, and every call's context stays small, so
that 2,000 messages fit the time of a test."""

_WORDS = """
backup rsync cron nightly notes log rotate disk quota naïve café 日本語 straße ключ deploy branch
rebase merge conflict test fixture timeout retry socket proxy cache token python anyio httpx schema
migration index vacuum snapshot restore permissions umask
"""
WORDS = _WORDS.split()


# -- helpers ----------------------------------------------------------------------------------


def compactor_provider(app: ASGIApp, *, gated: bool = True, key: str = KEY) -> Provider:
    """The compactor's provider on the Anthropic SDK (its own retries on), behind the prefix
    gate unless `gated` is False."""
    inner = provider_for(app, key=key, max_retries=4)
    return GatedProvider(inner, PrefixGate(), prefix_keys) if gated else inner


def compactor_for(
    chat: Chat,
    provider: Provider,
    *,
    ledger: Ledger | None = None,
    warn: Callable[[str], None] | None = None,
    clock: Callable[[], float] = time.monotonic,
    **settings: Any,
) -> Compactor:
    return Compactor(
        chat,
        provider,
        CompactorSettings(model=MODEL, effort=None, **settings),
        system=system_text(""),
        tools=TOOLS,
        ledger=ledger,
        on_warning=warn,
        clock=clock,
    )


def text_of_size(rng: random.Random, size: int, head: str = "") -> str:
    """About `size` bytes of words (some multi-byte), with a newline now and then."""
    words = [head] if head else []
    used = len(head.encode())
    while used < size:
        word = rng.choice(WORDS)
        if rng.random() < 0.03:
            word += "\n"
        words.append(word)
        used += len(word.encode()) + 1
    return " ".join(words)


MESSAGE_SIZES = (6, 60, 250, 480, 506, 507, 700, 1_200, 2_500, 4_000, 8_000)
KINDS = ("user", "ever", "tool", "echo", "note")


def append_mixed(chat: Chat, rng: random.Random, k: int) -> None:
    """Message k: free ones (<= 512 bytes as `kind: text`) and multi-KB ones."""
    chat.append(rng.choice(KINDS), text_of_size(rng, rng.choice(MESSAGE_SIZES), f"m{k}"))


def tree_records(chat_dir: Path) -> list[dict[str, Any]]:
    """Every record in chat/tree/*.jsonl; a torn line (SPEC §1.4) is no record."""
    records = []
    for path in sorted((chat_dir / "tree").glob("*.jsonl")):
        for line in path.read_bytes().split(b"\n"):
            try:
                record = json.loads(line)
            except ValueError:
                continue
            if isinstance(record, dict):
                records.append(record)
    return records


def existing_nodes(t: int) -> set[Node]:
    """Node (l, i) exists once (i+1)·2^l <= T (SPEC §2.1)."""
    return {(level, i) for level in range(t.bit_length()) for i in range(t >> level)}


def assert_built_once(chat_dir: Path, t: int) -> list[dict[str, Any]]:
    records = tree_records(chat_dir)
    counts = Counter((r["l"], r["i"]) for r in records)
    twice = sorted(node for node, count in counts.items() if count > 1)
    assert not twice, f"built more than once: {twice[:10]}"
    missing = sorted(existing_nodes(t) - counts.keys())
    assert not missing, f"never built: {missing[:10]} ({len(missing)} in all)"
    assert counts.keys() == existing_nodes(t), "a record for a node that does not exist"
    for record in records:
        size = len(record["text"].encode())
        assert record["size"] == size and 1 <= size <= 512, record
    return records


def node_of_name(name: str) -> Node:
    start, count = (int(part) for part in name.split("+"))
    level = count.bit_length() - 1
    assert count == 1 << level and start % count == 0, name
    return (level, start // count)


def is_merge(call: Call) -> bool:
    """A merge's input holds `id+n|` lines; a leaf's is `kind: text`."""
    return re.match(r"\d+\+\d+\|", call.input_text) is not None


def idle(compactor: Compactor) -> bool:
    """Nothing running and nothing that could start now (failed nodes wait for a message). The
    status's `queued` also counts leaves that must wait for older ones: not what this asks."""
    ready = compactor.chat.core.ready()
    return not compactor.in_flight and all(node in compactor.failed_at for node in ready)


def failed(chat: Chat, node: Node, times: int) -> Callable[[], bool]:
    """Whether `node` has failed exactly `times` times since it last got built."""
    return lambda: chat.core.failures.get(node) == times


async def went_round(compactor: Compactor) -> None:
    """Wakes the compactor and waits until its loop has gone round since: what that round
    starts is in `in_flight` by then (a call is there from its round until it lands). So a
    test sees that nothing started without waiting a while in which something might have."""
    before = compactor.rounds
    compactor.wake()
    await until(lambda: compactor.rounds > before)


async def settle(compactor: Compactor, timeout: float = 30.0) -> None:
    """Until the compactor is idle twice in a row (a finished call wakes the loop only later)."""
    with anyio.fail_after(timeout):
        while True:
            await until(lambda: idle(compactor), timeout)
            await anyio.sleep(0.02)
            if idle(compactor):
                return


async def drive(
    chat: Chat, compactor: Compactor, rng: random.Random, first: int, count: int
) -> None:
    """Appends messages while the compactor runs. Like a turn's settle wait (SPEC §6.1), it lets
    the compactor catch up when it falls far behind, so the views keep merging."""
    for k in range(first, first + count):
        append_mixed(chat, rng, k)
        compactor.message_logged()
        await anyio.sleep(0)
        if compactor.unbuilt() > 48:
            await until(lambda: compactor.unbuilt() <= 16 or idle(compactor), 60)


def assert_no_key(home: Path) -> None:
    secret = KEY.encode()
    for path in home.rglob("*"):
        if path.is_file():
            assert secret not in path.read_bytes(), f"the API key is in {path}"


def varied_lines(call: Call) -> Any:
    """Lines of varied lengths: some fit at once, some are over-long and need the follow-up,
    some stay over-long and get cut. Seeded by the input, so an SDK retry gets the same."""
    rng = random.Random(call.input_text)
    if call.attempt == 1:
        size = rng.choice((30, 150, 300, 450, 512, 513, 700, 1_100))
    else:
        size = rng.choice((250, 400, 500, 600, 650))
    return summarizer(size)(call)


# -- 1. a long chat, 8 calls at once -----------------------------------------------------------


@pytest.mark.anyio
async def test_two_thousand_messages_every_node_built_once(home: Path) -> None:
    fake = AnthropicFake(slow(0.0, varied_lines, chunk_delay=0.005), text_chunk=1024, ping=False)
    counter = InFlight(fake)
    chat = Chat.open(home / "chat", budget=SMALL)
    ledger = Ledger(ledger_path(home))
    compactor = compactor_for(chat, compactor_provider(counter), ledger=ledger)
    stopped = anyio.Event()

    async def service() -> None:
        await compactor.run()
        stopped.set()

    try:
        async with anyio.create_task_group() as group:
            group.start_soon(service)
            await drive(chat, compactor, random.Random(2000), 0, 2000)
            await until(lambda: compactor.unbuilt() == 0 and not compactor.in_flight, 60)
            t = chat.t
            assert t == 2000
            assert_built_once(chat.store.path, t)
            shrinking_before = chat.core.view.shrinking

            # the view settles: one more message, and once the compactor is done no line of the
            # view is a placeholder and no batch is left open
            chat.append("user", text_of_size(random.Random(1), 900, "one more"))
            compactor.message_logged()
            await until(lambda: compactor.unbuilt() == 0 and not compactor.in_flight, 30)
            assert not stopped.is_set()
            group.cancel_scope.cancel()

        records = assert_built_once(chat.store.path, t + 1)
        view = chat.core.view
        assert PLACEHOLDER not in chat.render_view()
        assert not view.shrinking, shrinking_before
        # at its message the view was at most its ceiling; a build since only turned the new
        # line's placeholder into its text (SPEC §3.1)
        assert view.size <= SMALL.ceiling - 29 + 512
        sizes = {(r["l"], r["i"]): r["size"] for r in records}
        assert view.size == sum(sizes[node] for node in view.nodes())

        # never more than 8 requests at the fake at once, and 8 did run together
        assert counter.now == 0
        assert counter.peak == 8

        # the ledger: one compaction record per call, naming exactly the nodes a model built
        ledger_records = read_records(ledger_path(home)).records
        assert {r.role for r in ledger_records} == {"compaction"}
        assert len(ledger_records) == compactor.calls == fake.totals.requests
        assert all(r.status == 200 and r.finished for r in fake.records)
        per_node = Counter(node_of_name(r.node) for r in ledger_records if r.node)
        model_built = {(r["l"], r["i"]) for r in records if not r.get("free") and not r.get("cut")}
        assert per_node.keys() == model_built
        assert compactor.built == len(model_built)
        assert max(per_node.values()) <= 5
        assert 1 in per_node.values() and any(n >= 2 for n in per_node.values())  # follow-ups ran
        assert not any(r.get("cut") for r in records)
        prompt = sum(r.input + r.cache_read + r.cache_write for r in ledger_records)
        assert prompt == fake.totals.prompt
        assert compactor.last_error is None
    finally:
        ledger.close()
        chat.close()
    assert_no_key(home)


# -- 2. error storms --------------------------------------------------------------------------

POISON = "POISON " + "日本語" * 200
"""A message whose every compaction fails; its input cut at 512 bytes splits a character."""


def storms(inner: Callable[[Call], Any]) -> Callable[[Call], Any]:
    """Bursts of HTTP errors (longer than the SDK's 4 retries) and of cut streams, by the
    request's position at the fake."""

    def behave(call: Call) -> Any:
        for start, stop, status in ((30, 90, 429), (200, 280, 500), (400, 480, 529)):
            if start <= call.index < stop:
                return Fail(status)
        if 560 <= call.index < 580:
            return cut(inner, after_events=3)(call)
        return inner(call)

    return behave


@pytest.mark.anyio
async def test_error_storms_end_with_every_node_built(home: Path) -> None:
    script = Script(storms(varied_lines))
    script.route(lambda call: call.input_text.startswith("user: POISON"), Fail(500))
    fake = AnthropicFake(script, text_chunk=256, ping=False)
    chat = Chat.open(home / "chat", budget=SMALL)
    compactor = compactor_for(chat, compactor_provider(fake))
    rng = random.Random(7)
    stopped = anyio.Event()

    async def service() -> None:
        await compactor.run()
        stopped.set()

    try:
        async with anyio.create_task_group() as group:
            group.start_soon(service)
            await drive(chat, compactor, rng, 0, 5)
            chat.append("user", POISON)
            compactor.message_logged()
            await drive(chat, compactor, rng, 6, 250)
            # then messages until everything is built: each one lets failed nodes try again
            for k in range(256, 300):
                await settle(compactor)
                if compactor.unbuilt() == 0:
                    break
                append_mixed(chat, rng, k)
                compactor.message_logged()
            await settle(compactor)
            assert not stopped.is_set(), "the service died"
            group.cancel_scope.cancel()

        assert compactor.unbuilt() == 0
        records = assert_built_once(chat.store.path, chat.t)
        statuses = Counter(r.status for r in fake.records)
        assert statuses[429] >= 60 and statuses[500] >= 80 and statuses[529] >= 80, statuses
        assert sum(1 for r in fake.records if r.status == 200 and not r.finished) == 20
        assert compactor.last_error is not None

        # the poisoned leaf: three failures (each after the SDK's 4 retries), then built cut
        poison = [c for c in script.calls if c.input_text.startswith("user: POISON")]
        assert len(poison) == 3 * 5
        (record,) = [r for r in records if (r["l"], r["i"]) == (0, 5)]
        assert record.get("cut") is True
        expected = f"user: {POISON}".encode()[:512].decode("utf-8", "ignore")
        assert record["text"] == expected and record["size"] == 511
        cut_nodes = [(r["l"], r["i"]) for r in records if r.get("cut")]
        assert len(cut_nodes) < len(records) // 10, cut_nodes
    finally:
        chat.close()


# -- 3. unusable and messy replies ------------------------------------------------------------

LONG = "user: " + "the restore drill from the nightly snapshot took 40 minutes; " * 30


def one_message_chat(home: Path, text: str = LONG[6:]) -> Chat:
    chat = Chat.open(home / "chat")
    chat.append("user", text)
    return chat


@pytest.mark.anyio
@pytest.mark.parametrize("behaviour", [empty(), thinking_only()], ids=["empty", "thinking-only"])
async def test_an_unusable_reply_is_a_failure(home: Path, behaviour: Any) -> None:
    script = Script(behaviour)
    fake = AnthropicFake(script)
    chat = one_message_chat(home)
    ledger = Ledger(ledger_path(home))
    compactor = compactor_for(chat, compactor_provider(fake), ledger=ledger)
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(compactor.run)
            for failures in (1, 2):
                await until(failed(chat, (0, 0), failures))
                await settle(compactor)
                assert len(fake.records) == failures  # the empty try ended the size loop
                assert not chat.core.tree.is_built((0, 0))
                assert (0, 0) in compactor.failed_at
                assert "0+1" in (compactor.last_error or "")
                chat.append("user", f"short message {failures}")  # free: no call of its own
                compactor.message_logged()
            await until(lambda: chat.core.tree.is_built((0, 0)))
            await settle(compactor)
            group.cancel_scope.cancel()
        assert len([call for call in script.calls if not is_merge(call)]) == 3
        (record,) = [r for r in tree_records(chat.store.path) if (r["l"], r["i"]) == (0, 0)]
        assert record.get("cut") is True
        assert record["text"] == LONG.encode()[:512].decode()
        ledger_records = read_records(ledger_path(home)).records
        assert [r.node for r in ledger_records if r.node == "0+1"] == ["0+1"] * 3
        assert {r.role for r in ledger_records} == {"compaction"}
    finally:
        ledger.close()
        chat.close()


@pytest.mark.anyio
async def test_a_model_that_never_shortens_gets_a_cut_line_after_two_calls(home: Path) -> None:
    fake = AnthropicFake(never_shortens(900))
    chat = one_message_chat(home)
    compactor = compactor_for(chat, compactor_provider(fake))
    try:
        with anyio.fail_after(20):
            await compactor.run(until_built=True)
        assert len(fake.records) == 2
        (record,) = tree_records(chat.store.path)
        assert "cut" not in record and "free" not in record
        line = sized_line(LONG, 900)
        assert line.startswith(record["text"])
        assert 512 * 4 // 5 <= record["size"] <= 512
    finally:
        chat.close()


@pytest.mark.anyio
async def test_a_copied_head_and_a_code_fence_are_cleaned(home: Path) -> None:
    fake = AnthropicFake(fenced(with_head(summarizer(300), head="7+1|"), lang="text"))
    chat = one_message_chat(home)
    compactor = compactor_for(chat, compactor_provider(fake))
    try:
        with anyio.fail_after(20):
            await compactor.run(until_built=True)
        (record,) = tree_records(chat.store.path)
        assert record["text"] == sized_line(LONG, 300)
        assert len(fake.records) == 1
    finally:
        chat.close()


@pytest.mark.anyio
async def test_a_cut_stream_and_the_deadline_are_failures_not_short_lines(home: Path) -> None:
    script = Script(summarizer(300)).push(cut(summarizer(300), after_events=4), slow(30, empty()))
    fake = AnthropicFake(script, text_chunk=16)
    chat = one_message_chat(home)
    compactor = compactor_for(chat, compactor_provider(fake), deadline=0.5)
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(compactor.run)
            await until(failed(chat, (0, 0), 1))
            assert "0+1" in (compactor.last_error or "")
            chat.append("user", "next")
            compactor.message_logged()
            await until(failed(chat, (0, 0), 2), timeout=10)
            chat.append("user", "and next")
            compactor.message_logged()
            await until(lambda: chat.core.tree.is_built((0, 0)))
            await settle(compactor)
            group.cancel_scope.cancel()
        (record,) = [r for r in tree_records(chat.store.path) if (r["l"], r["i"]) == (0, 0)]
        assert record["text"] == sized_line(LONG, 300) and "cut" not in record
        assert len(fake.records) == 3
    finally:
        chat.close()


# -- 4. when a failed node is tried again -----------------------------------------------------


async def _wait_on(compactor: Compactor) -> None:
    """Waits for summaries as a turn does, until cancelled."""
    with compactor.waiting():
        await anyio.sleep_forever()


@pytest.mark.anyio
async def test_while_waiting_a_failed_node_is_retried_ten_seconds_after_its_failure(
    home: Path,
) -> None:
    clock = FakeClock()
    fake = AnthropicFake(fail(500, times=5, then=summarizer(300)))  # one call's 5 tries fail
    chat = one_message_chat(home)
    compactor = compactor_for(chat, compactor_provider(fake), clock=clock)
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(_wait_on, compactor)
            group.start_soon(compactor.run)
            await until(failed(chat, (0, 0), 1))
            await settle(compactor)
            assert len(fake.records) == 5
            assert compactor.failed_at[(0, 0)] == clock()
            clock.advance(9.5)
            await went_round(compactor)
            assert not compactor.in_flight and len(fake.records) == 5
            assert not chat.core.tree.is_built((0, 0))
            clock.advance(0.5)
            compactor.wake()
            await until(lambda: chat.core.tree.is_built((0, 0)), timeout=5)
            group.cancel_scope.cancel()
        assert len(fake.records) == 6
    finally:
        chat.close()


@pytest.mark.anyio
async def test_without_a_waiting_turn_only_a_new_message_retries(home: Path) -> None:
    clock = FakeClock()
    fake = AnthropicFake(fail(500, times=5, then=summarizer(300)))
    chat = one_message_chat(home)
    compactor = compactor_for(chat, compactor_provider(fake), clock=clock)
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(compactor.run)
            await until(failed(chat, (0, 0), 1))
            await settle(compactor)
            clock.advance(3600)
            await went_round(compactor)
            assert not compactor.in_flight and len(fake.records) == 5
            assert not chat.core.tree.is_built((0, 0))
            chat.append("user", "a new message")
            compactor.message_logged()
            await until(lambda: chat.core.tree.is_built((0, 0)), timeout=5)
            group.cancel_scope.cancel()
        assert len(fake.records) == 6
    finally:
        chat.close()


@pytest.mark.anyio
async def test_a_failing_merge_does_not_hold_back_the_other_ready_merges(home: Path) -> None:
    chat = Chat.open(home / "chat")
    rng = random.Random(4)
    try:
        for k in range(8):
            chat.append("user", text_of_size(rng, 1_000, f"m{k}"))
        for i in range(8):
            chat.build((0, i), "y" * 300)
        script = Script(summarizer(300))
        script.route(lambda call: call.input_text.startswith("0+1|"), Fail(500))  # merge (1, 0)
        compactor = compactor_for(chat, compactor_provider(AnthropicFake(script)), concurrency=1)
        async with anyio.create_task_group() as group:
            group.start_soon(compactor.run)
            # (1, 0) fails and waits for the next message; (1, 1), (1, 2), (1, 3) must go on
            await until(lambda: all(chat.core.tree.is_built((1, i)) for i in (1, 2, 3)), 10)
            group.cancel_scope.cancel()
        assert chat.core.failures == {(1, 0): 1}
    finally:
        chat.close()


# -- 5. the prefix gate -----------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize("gated", [True, False], ids=["gated", "ungated"])
async def test_eight_leaves_on_one_prefix_write_it_once_through_the_gate(
    home: Path, gated: bool
) -> None:
    chat = Chat.open(home / "chat")
    rng = random.Random(5)
    try:
        # a built history, so that the eight leaves share a context as well as the system prompt
        for k in range(40):
            chat.append("user", text_of_size(rng, 300, f"old {k}"))
        history = compactor_for(chat, compactor_provider(AnthropicFake(summarizer(300))))
        with anyio.fail_after(20):
            await history.run(until_built=True)
        for k in range(8):
            chat.append("user", text_of_size(rng, 1_500, f"new {k}"))
        leaves = [(0, i) for i in range(40, 48)]

        script = Script(slow(0.1, summarizer(300)))  # the response starts 0.1 s after the request
        fake = AnthropicFake(script)
        compactor = compactor_for(chat, compactor_provider(fake, gated=gated))
        async with anyio.create_task_group() as group:
            group.start_soon(compactor.run)
            await until(lambda: all(chat.core.tree.is_built(leaf) for leaf in leaves), 20)
            group.cancel_scope.cancel()

        calls = [call for call in script.calls if not is_merge(call)]
        assert len(calls) == 8
        contexts = {json.dumps(call.body["messages"][0]["content"][:-1]) for call in calls}
        assert len(contexts) == 1  # one shared context (all but the task block)
        records = [fake.records[call.index] for call in calls]
        writers = [r for r in records if r.cache_read == 0]
        if gated:
            first, *others = records
            assert writers == [first] and first.cache_write > 0
            reads = {r.cache_read for r in others}
            assert len(reads) == 1 and reads.pop() > 0  # all read the one entry the first wrote
            assert all(r.cache_write < first.cache_write for r in others)  # just their own task
        else:
            assert len(writers) >= 2, [(r.cache_read, r.cache_write) for r in records]
    finally:
        chat.close()


# -- 6. priority ------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_priority_urgent_nodes_then_leaves_then_merges_lower_level_first(
    home: Path,
) -> None:
    chat = Chat.open(home / "chat")
    ledger = Ledger(ledger_path(home))
    rng = random.Random(6)
    try:
        for k in range(16):
            chat.append("user", text_of_size(rng, 1_000, f"m{k}"))
        line = "x" * 300  # two of them make no free parent
        for i in range(8):
            chat.build((0, i), line)
        chat.build((1, 0), line)
        chat.build((1, 1), line)
        assert chat.core.ready() == [(0, i) for i in range(8, 16)] + [(1, 2), (1, 3), (2, 0)]

        fake = AnthropicFake(summarizer(300))
        compactor = compactor_for(chat, compactor_provider(fake), ledger=ledger, concurrency=1)
        compactor.prioritize([(0, 15), (1, 3)])
        with anyio.fail_after(20):
            await compactor.run(until_built=True)

        order = [node_of_name(r.node) for r in read_records(ledger_path(home)).records if r.node]
        assert order == [
            (0, 15),
            (1, 3),
            *[(0, i) for i in range(8, 15)],
            (1, 2),
            (1, 4),
            (1, 5),
            (1, 6),
            (1, 7),
            (2, 0),
            (2, 1),
            (2, 2),
            (2, 3),
            (3, 0),
            (3, 1),
            (4, 0),
        ]
    finally:
        ledger.close()
        chat.close()


@pytest.mark.anyio
async def test_while_a_batch_waits_its_most_due_parents_go_before_new_leaves(home: Path) -> None:
    """The compactor lags (an import): the leaves it built made the view pass its ceiling, and
    24 more messages came. Building the 24 new leaves first would leave the batch stuck, and
    then let it merge the newest pairs first; the batch's parents go first instead."""
    budget = Budget(ceiling=4_000, floor=2_000, cceiling=32_000, cfloor=16_000)
    chat = Chat.open(home / "chat", budget=budget)
    ledger = Ledger(ledger_path(home))
    rng = random.Random(9)
    try:
        for k in range(16):
            chat.append("user", text_of_size(rng, 1_000, f"m{k}"))
        for i in range(16):
            chat.build((0, i), "x" * 300)  # two of them make no free parent
        for k in range(16, 40):
            chat.append("user", text_of_size(rng, 1_000, f"m{k}"))
        assert chat.core.view.shrinking and chat.core.view.nodes() == [(0, i) for i in range(40)]

        # the 13th call never answers: the test sees what the first 12 were
        script = Script(sequence(*[summarizer(300)] * 12, then=slow(60, summarizer(300))))
        provider = compactor_provider(AnthropicFake(script))
        compactor = compactor_for(chat, provider, ledger=ledger, concurrency=1)
        async with anyio.create_task_group() as group:
            group.start_soon(compactor.run)
            await until(lambda: compactor.built == 12 and bool(compactor.in_flight), 20)
            assert compactor.in_flight == {(0, 16)}  # only now the first new leaf
            group.cancel_scope.cancel()

        order = [node_of_name(r.node) for r in read_records(ledger_path(home)).records if r.node]
        # the oldest pairs first (the most due), then the pairs of their parents: the merges
        # the batch needs to get from 5,496 bytes down to its floor of 2,000
        assert order == [(1, i) for i in range(8)] + [(2, i) for i in range(4)]

        chat.append("user", "and one more")  # the batch goes on at the next message
        view = chat.core.view
        assert not view.shrinking and view.size <= budget.floor
        assert view.nodes() == [(2, i) for i in range(4)] + [(0, i) for i in range(16, 41)]
    finally:
        ledger.close()
        chat.close()


@pytest.mark.anyio
async def test_drain_starts_no_call_and_lets_the_running_ones_land(home: Path) -> None:
    chat = Chat.open(home / "chat")
    ledger = Ledger(ledger_path(home))
    rng = random.Random(10)
    try:
        for k in range(20):
            chat.append("user", text_of_size(rng, 1_000, f"m{k}"))
        fake = AnthropicFake(slow(0.3, summarizer(300)), ping=False)
        compactor = compactor_for(chat, compactor_provider(fake), ledger=ledger)
        async with anyio.create_task_group() as group:
            group.start_soon(compactor.run)
            await until(lambda: len(compactor.in_flight) == 8 and len(fake.records) >= 1)
            running = set(compactor.in_flight)
            with anyio.fail_after(10):
                await compactor.drain()
            assert not compactor.in_flight
            await went_round(compactor)  # a round after the drain starts nothing
            assert not compactor.in_flight
            group.cancel_scope.cancel()

        # the eight calls in flight were answered in full and their lines kept; no other began
        assert len(fake.records) == 8 and all(r.finished for r in fake.records)
        built = {(r["l"], r["i"]) for r in tree_records(chat.store.path) if not r.get("free")}
        assert built == running == {(0, i) for i in range(8)}
        recorded = [node_of_name(r.node) for r in read_records(ledger_path(home)).records]
        assert sorted(recorded) == sorted(running)
    finally:
        ledger.close()
        chat.close()


# -- 7. setup errors --------------------------------------------------------------------------


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("fake", "kind"),
    [
        (lambda: AnthropicFake(summarizer(300), api_key="the-right-key"), "auth"),
        (lambda: AnthropicFake(constant(Fail(404, f"model: {MODEL}"))), "not_found"),
    ],
    ids=["wrong-key", "unknown-model"],
)
async def test_a_setup_error_is_raised_and_cuts_no_node(
    home: Path, fake: Callable[[], AnthropicFake], kind: str
) -> None:
    api = fake()
    chat = Chat.open(home / "chat")
    rng = random.Random(8)
    try:
        for k in range(12):
            chat.append("user", text_of_size(rng, 1_000, f"m{k}"))
        compactor = compactor_for(chat, compactor_provider(api))
        for _ in range(4):  # more than three times: a setup error is never the node's failure
            compactor.message_logged()  # as a new message would: the failed nodes try again
            with anyio.fail_after(20), pytest.raises(ProviderError) as caught:
                await compactor.run(until_built=True)
            assert caught.value.kind == kind
        assert chat.core.failures == {}
        status = chat.status()
        assert status.cut == 0 and status.unbuilt > 0
        assert not any(r.get("cut") for r in tree_records(chat.store.path))
        assert 4 <= len(api.records) <= 4 * 8  # each run tried, at most the 8 leaves it may
        for text in (str(caught.value), repr(caught.value), compactor.last_error or ""):
            assert KEY not in text
    finally:
        chat.close()
    assert_no_key(home)
