"""How the compactor handles what goes wrong (SPEC §4.5, §1.8): whose fault a failure is, what
the user is told, what `memory status` shows, and what the ledger keeps.

As in test_service.py: a real Chat on disk, the real AnthropicProvider over the in-process fake.
A few tests stand in for a bug or a full disk by making one of our own methods raise, since no
reply of the fake could cause either.
"""

from __future__ import annotations

import random
import socket
from pathlib import Path
from typing import Any

import anyio
import pytest
from test_service import (
    MODEL,
    compactor_for,
    compactor_provider,
    failed,
    node_of_name,
    one_message_chat,
    settle,
    text_of_size,
    tree_records,
    until,
    went_round,
)

from evertalk.chat import Chat
from evertalk.compactor.service import Compactor, CompactorSettings
from evertalk.ledger import Ledger, ledger_path, read_records
from evertalk.memory import Node
from evertalk.memory.tree import BUILT
from evertalk.prompts import TOOLS, system_text
from evertalk.providers.anthropic import AnthropicProvider
from evertalk.providers.base import ProviderError
from evertalk.store.compactor_status import read_status
from evertalk.store.errors import StoreError
from fakes import AnthropicFake, Fail, FakeClock, Script, constant, cut, empty, slow, summarizer

pytestmark = pytest.mark.anyio


def long_chat(home: Path, count: int, seed: int = 11) -> Chat:
    """`count` messages of about 1,000 bytes: no leaf is free."""
    chat = Chat.open(home / "chat")
    rng = random.Random(seed)
    for k in range(count):
        chat.append("user", text_of_size(rng, 1_000, f"m{k}"))
    return chat


# -- whose fault -------------------------------------------------------------------------------


def refused_setting(chat: Chat, fake: AnthropicFake, warnings: list[str]) -> Compactor:
    # the adapter knows no effort "bogus" for this model: it refuses before sending anything;
    # a still clock: no probe comes on a timer, only with a message
    return Compactor(
        chat,
        compactor_provider(fake),
        CompactorSettings(model=MODEL, effort="bogus"),
        system=system_text(""),
        tools=TOOLS,
        on_warning=warnings.append,
        clock=FakeClock(),
    )


async def test_a_setting_the_adapter_refuses_pauses_and_cuts_no_node(home: Path) -> None:
    fake = AnthropicFake(summarizer(300))
    chat = long_chat(home, 4)
    warnings: list[str] = []
    compactor = refused_setting(chat, fake, warnings)
    try:
        for _ in range(4):  # more than three times: the setting is not the nodes' failure
            compactor.message_logged()
            with anyio.fail_after(20), pytest.raises(ProviderError) as caught:
                await compactor.run(until_built=True)
            assert caught.value.kind == "bad_request" and "bogus" in str(caught.value)
        assert chat.core.failures == {} and fake.records == []
        assert chat.status().cut == 0 and not any(r.get("cut") for r in tree_records(home / "chat"))
        assert warnings == []  # `memory compact` reports the raised error itself

        # as a session's service it pauses, says so once, and goes on once the setting is fixed
        compactor = refused_setting(chat, fake, warnings)
        async with anyio.create_task_group() as group:
            group.start_soon(compactor.run)
            await until(lambda: bool(warnings))
            for _ in range(3):  # each message lets one call probe the setup again
                compactor.message_logged()
                await went_round(compactor)
                await until(lambda: not compactor.in_flight)
            assert compactor.setup_error is not None and fake.records == []
            assert len(warnings) == 1 and warnings[0].startswith("memory: summaries are paused")
            assert "bogus" in warnings[0]
            compactor.settings = CompactorSettings(model=MODEL, effort=None)
            compactor.message_logged()
            await until(lambda: compactor.unbuilt() == 0)
            group.cancel_scope.cancel()
        assert chat.core.failures == {} and chat.status().cut == 0
    finally:
        chat.close()


async def test_a_paused_setup_is_probed_once_per_interval_or_message_not_in_a_burst(
    home: Path,
) -> None:
    """A wrong setting (a key, a model) fails every call at once: trying each ready node in turn
    would send a burst of calls that cannot work. After the first calls found it, one probe at
    each new message, and between messages one after PROBE_FIRST seconds (doubling)."""
    chat = long_chat(home, 8)  # eight leaves ready
    warnings: list[str] = []
    compactor = refused_setting(chat, AnthropicFake(summarizer(300)), warnings)
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(compactor.run)
            await until(lambda: bool(warnings) and not compactor.in_flight)
            for _ in range(2):
                compactor.message_logged()  # every node may be tried again: the setup first
                await until(lambda: len(compactor.failed_at) == 1 and not compactor.in_flight)
                await went_round(compactor)  # where a burst would try the next leaf
                assert not compactor.in_flight and len(compactor.failed_at) == 1
                assert compactor.setup_error is not None
            group.cancel_scope.cancel()
        assert chat.core.failures == {} and len(warnings) == 1
    finally:
        chat.close()


def closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
    return port


async def test_a_server_that_cannot_be_reached_pauses_and_cuts_no_node(home: Path) -> None:
    """Nothing listens at the compactor's address (a network that is down, a local model server
    not started yet): no request went out, so no node is at fault. Counted as failures, three
    messages would cut every ready node; instead the summaries pause, one call probes at each
    message, and they go on once the server answers."""
    chat = long_chat(home, 8)
    warnings: list[str] = []
    away = AnthropicProvider("sk-ant-test", f"http://127.0.0.1:{closed_port()}")
    # a still clock: no probe comes on a timer, each one here is a message's
    compactor = compactor_for(chat, away, warn=warnings.append, clock=FakeClock())
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(compactor.run)
            await until(lambda: bool(warnings) and not compactor.in_flight)
            for _ in range(4):  # more than three messages
                compactor.message_logged()  # clears the waits: the one left is the probe's
                await until(lambda: len(compactor.failed_at) == 1 and not compactor.in_flight)
                await went_round(compactor)  # where a burst would try the next leaf
                assert not compactor.in_flight
            assert compactor.setup_error is not None and chat.core.failures == {}
            assert len(compactor.failed_at) == 1  # one probe at a time, never a burst
            assert len(warnings) == 1
            assert warnings[0].startswith("memory: summaries are paused: the compactor's model")
            assert "cannot be reached" in warnings[0] and "could not connect" in warnings[0]
            assert compactor.status().paused
            compactor.provider = compactor_provider(AnthropicFake(summarizer(300)))
            compactor.message_logged()
            await until(lambda: compactor.unbuilt() == 0)
            group.cancel_scope.cancel()
        assert chat.core.failures == {} and chat.status().cut == 0
        assert compactor.setup_error is None and not compactor.status().paused
    finally:
        await away.aclose()
        chat.close()


async def test_a_bug_in_an_attempt_is_the_nodes_failure(
    home: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    chat = one_message_chat(home)
    compactor = compactor_for(chat, compactor_provider(AnthropicFake(summarizer(300))))
    task = compactor._task

    def broken(node: Node) -> str:  # a bug in making the request of this one node
        if node == (0, 0):
            raise KeyError("no such field")
        return task(node)

    monkeypatch.setattr(compactor, "_task", broken)
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(compactor.run)
            for failures in (1, 2):
                await until(failed(chat, (0, 0), failures))
                await settle(compactor)
                assert "0+1: KeyError" in (compactor.last_error or "")
                chat.append("user", f"short {failures}")
                compactor.message_logged()
            await until(lambda: chat.core.tree.is_built((0, 0)))  # the third: built cut
            group.cancel_scope.cancel()
        (record,) = [r for r in tree_records(chat.store.path) if (r["l"], r["i"]) == (0, 0)]
        assert record.get("cut") is True
    finally:
        chat.close()


@pytest.mark.parametrize(
    "error",
    [OSError(28, "No space left on device"), StoreError("cannot append to the log: disk full")],
    ids=["oserror", "storeerror"],
)
async def test_a_line_the_disk_cannot_take_counts_no_failure(
    home: Path, monkeypatch: pytest.MonkeyPatch, error: Exception
) -> None:
    chat = one_message_chat(home)
    fake = AnthropicFake(summarizer(300))
    compactor = compactor_for(chat, compactor_provider(fake))
    append_nodes = chat.store.append_nodes
    refusals = [error] * 4

    def full_disk(nodes: list[tuple[int, int, str, int]], **options: Any) -> None:
        if any(flag == BUILT for *_, flag in nodes) and refusals:
            raise refusals.pop()
        append_nodes(nodes, **options)

    monkeypatch.setattr(chat.store, "append_nodes", full_disk)
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(compactor.run)
            for round_ in range(4):  # more than three times: the disk is not the node's fault
                await until(lambda: (0, 0) in compactor.failed_at and not compactor.in_flight)
                assert chat.core.failures == {} and not chat.core.tree.is_built((0, 0))
                assert "0+1" in (compactor.last_error or "")
                chat.append("user", f"short {round_}")
                compactor.message_logged()
            await until(lambda: chat.core.tree.is_built((0, 0)))
            group.cancel_scope.cancel()
        (record,) = [r for r in tree_records(chat.store.path) if (r["l"], r["i"]) == (0, 0)]
        assert "cut" not in record and len(fake.records) == 5
    finally:
        chat.close()


# -- what the user is told ---------------------------------------------------------------------


async def test_a_nodes_first_failure_is_one_warning(home: Path) -> None:
    chat = one_message_chat(home)
    warnings: list[str] = []
    compactor = compactor_for(chat, compactor_provider(AnthropicFake(empty())))
    compactor.on_warning = warnings.append
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(compactor.run)
            for failures in (1, 2):
                await until(failed(chat, (0, 0), failures))
                await settle(compactor)
                chat.append("user", f"short {failures}")
                compactor.message_logged()
            await until(lambda: chat.core.tree.is_built((0, 0)))
            await settle(compactor)
            group.cancel_scope.cancel()
        # three failures, one warning (the merge above it fails too, with a warning of its own)
        assert [w for w in warnings if "0+1" in w] == [
            "memory: 0+1 could not be summarized (the model gave no usable line); "
            "it will be tried again"
        ]
    finally:
        chat.close()


async def test_memory_status_shows_a_failure(home: Path) -> None:
    # a 400 is not retried by the SDK: the node fails at once, and the status file says so
    # once its rate allows (no stopwatch here: a loaded machine is slow, not wrong)
    chat = one_message_chat(home)
    compactor = compactor_for(
        chat, compactor_provider(AnthropicFake(constant(Fail(400, "too odd"))))
    )
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(compactor.run)
            await until(failed(chat, (0, 0), 1))
            with anyio.fail_after(30):
                while True:
                    live = read_status(chat.store.path)  # as `evertalk memory status` reads it
                    if live is not None and live.failed == 1:
                        break
                    await anyio.sleep(0.05)
            assert live.running == 0 and live.queued == 0
            assert live.last_error is not None and "0+1" in live.last_error
            assert "too odd" in live.last_error
            group.cancel_scope.cancel()
    finally:
        chat.close()


# -- the status counts -------------------------------------------------------------------------


async def test_queued_counts_every_leaf_that_waits_not_only_the_first_eight(home: Path) -> None:
    chat = long_chat(home, 20)
    script = Script(slow(30, summarizer(300)))
    # ungated: behind the prefix gate, seven would wait for the first response to begin
    compactor = compactor_for(chat, compactor_provider(AnthropicFake(script), gated=False))
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(compactor.run)
            await until(lambda: len(script.calls) == 8)
            status = compactor.status()
            assert (status.running, status.queued, status.failed) == (8, 12, 0)
            group.cancel_scope.cancel()
    finally:
        chat.close()


async def test_queued_counts_ready_merges_and_leaves_out_failed_nodes(home: Path) -> None:
    chat = long_chat(home, 4)
    try:
        for i in range(4):
            chat.build((0, i), "z" * 300)  # two of them make no free parent
        script = Script(summarizer(300))
        script.route(lambda call: call.input_text.startswith("0+1|"), Fail(400))  # merge (1, 0)
        script.route(lambda call: True, slow(30, summarizer(300)))  # (1, 1) runs on
        compactor = compactor_for(chat, compactor_provider(AnthropicFake(script), gated=False))
        chat.append("user", text_of_size(random.Random(1), 1_000, "m4"))  # leaf 4, unbuilt
        async with anyio.create_task_group() as group:
            group.start_soon(compactor.run)
            await until(lambda: (1, 0) in compactor.failed_at and len(script.calls) == 3)
            status = compactor.status()
            # running: (1, 1) and leaf 4; failed: (1, 0); nothing else needs a call yet
            assert (status.running, status.queued, status.failed) == (2, 0, 1)
            group.cancel_scope.cancel()
    finally:
        chat.close()


# -- the rules of readiness hold for urgent nodes ----------------------------------------------


async def test_an_urgent_leaf_waits_for_its_place_among_the_first_eight(home: Path) -> None:
    chat = long_chat(home, 16)
    ledger = Ledger(ledger_path(home))
    try:
        compactor = compactor_for(
            chat, compactor_provider(AnthropicFake(summarizer(300))), ledger=ledger, concurrency=1
        )
        compactor.prioritize([(0, 12), (1, 7)])  # (1, 7)'s halves are unbuilt: not ready yet
        with anyio.fail_after(30):
            await compactor.run(until_built=True)
        order = [node_of_name(r.node) for r in read_records(ledger_path(home)).records if r.node]
        # leaf 12 may start once fewer than 8 unbuilt leaves precede it: after leaf 4
        assert order[:7] == [(0, 0), (0, 1), (0, 2), (0, 3), (0, 4), (0, 12), (0, 5)]
        # merge (1, 7) goes first of all merges, but only once leaves 14 and 15 are built
        at = order.index((1, 7))
        assert order.index((0, 14)) < at and order.index((0, 15)) < at
        merges = [node for node in order if node[0] > 0]
        assert merges[0] == (1, 7)
    finally:
        ledger.close()
        chat.close()


# -- the ledger keeps failed calls -------------------------------------------------------------


async def test_a_cut_stream_and_the_deadline_leave_failed_records_in_the_ledger(
    home: Path,
) -> None:
    script = Script(summarizer(300)).push(cut(summarizer(300), after_events=4), slow(30, empty()))
    fake = AnthropicFake(script, text_chunk=16)
    chat = one_message_chat(home)
    ledger = Ledger(ledger_path(home))
    compactor = compactor_for(chat, compactor_provider(fake), ledger=ledger, deadline=0.5)
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(compactor.run)
            await until(failed(chat, (0, 0), 1))
            chat.append("user", "next")
            compactor.message_logged()
            await until(failed(chat, (0, 0), 2), timeout=10)
            assert compactor.last_error == "0+1: no reply within the 0.5-second deadline"
            chat.append("user", "and next")
            compactor.message_logged()
            await until(lambda: chat.core.tree.is_built((0, 0)))
            await settle(compactor)
            group.cancel_scope.cancel()
        records = [r for r in read_records(ledger_path(home)).records if r.node == "0+1"]
        assert [r.failed for r in records] == [True, True, False]
        assert all(r.role == "compaction" and r.model == MODEL for r in records)
        # the cut stream had reported its prompt's tokens when it began (Anthropic's
        # message_start); the call that never answered reported nothing
        cut_call, late_call = records[:2]
        assert cut_call.input + cut_call.cache_read + cut_call.cache_write > 0
        assert cut_call.cost is not None and cut_call.cost > 0
        assert late_call.input == late_call.output == late_call.cache_write == 0
        assert records[2].output > 0 and compactor.calls == 3
        raw = ledger_path(home).read_text().splitlines()
        assert sum('"failed":true' in line for line in raw) == 2
    finally:
        ledger.close()
        chat.close()


async def test_a_call_refused_before_its_response_leaves_no_record(home: Path) -> None:
    fake = AnthropicFake(constant(Fail(400, "bad")))  # an HTTP error: nothing was answered
    chat = one_message_chat(home)
    ledger = Ledger(ledger_path(home))
    compactor = compactor_for(chat, compactor_provider(fake), ledger=ledger)
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(compactor.run)
            await until(failed(chat, (0, 0), 1))
            group.cancel_scope.cancel()
        assert not ledger_path(home).exists() or read_records(ledger_path(home)).records == []
        assert compactor.calls == 0
    finally:
        ledger.close()
        chat.close()
