"""Catching up (SPEC §3.7): a chat with no summaries compacted against the Anthropic fake with its
context-window check on. No request may pass the window: the core bounds each context to the
cview's ceiling, and the compactor fits each request into its model's window (`context_window`),
leaving out more of the oldest lines, or cutting a node whose own input does not fit."""

from __future__ import annotations

import random
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio
import pytest
from test_service import (
    append_mixed,
    assert_built_once,
    compactor_for,
    compactor_provider,
    text_of_size,
    tree_records,
)

from evertalk.chat import Chat
from evertalk.compactor.service import Compactor
from evertalk.memory import Budget, Node
from evertalk.memory.view import render_lines
from evertalk.providers.base import Provider
from fakes import AnthropicFake, Call, FakeClock, RequestRecord, summarizer
from fakes.anthropic_fake import prompt_blocks

SMALL = Budget(ceiling=16_000, floor=8_000, cceiling=4_000, cfloor=2_000)


def compactor(
    chat: Chat, provider: Provider, warn: Callable[[str], None] | None = None, **settings: Any
) -> Compactor:
    return compactor_for(chat, provider, warn=warn, **settings)


def prompt_tokens(record: RequestRecord) -> int:
    """A request's prompt in the fake's tokens, as its window check counts them."""
    assert record.body is not None
    return sum(block.tokens for block in prompt_blocks(record.body))


def no_tree_chat(home: Path, count: int, budget: Budget | None = None, seed: int = 30) -> Chat:
    """What an import leaves: every message logged, only the free nodes built."""
    chat = Chat.open(home / "chat", budget=budget)
    rng = random.Random(seed)
    for k in range(count):
        append_mixed(chat, rng, k)
    return chat


def node_of(call: Call) -> Node:
    """The node a compaction task names: `squeeze message N` or `A+n and B+n`."""
    text = call.last_user_text
    leaf = re.search(r"Compaction: squeeze message (\d+) ", text)
    if leaf:
        return (0, int(leaf.group(1)))
    merge = re.search(r"Compaction: (\d+)\+(\d+) and ", text)
    assert merge, text[-600:]
    start, count = int(merge.group(1)), int(merge.group(2))
    level = count.bit_length()  # the parent's level: one above its halves'
    return (level, start >> level)


def context_of(call: Call) -> list[str]:
    """The lines of a compaction's `<chat>` context, as sent."""
    text = "".join(block["text"] for block in call.body["messages"][0]["content"])
    lines = text[: text.index("</chat>")].split("\n")
    assert lines[0] == "<chat>" and lines[-1] == ""
    return lines[1:-1]


@pytest.mark.anyio
async def test_a_chat_with_no_tree_catches_up_within_the_window(home: Path) -> None:
    """Before: each context held every built line before its node, 40,000 tokens and more by
    the end, and the fake refused them as the real API does."""
    window = 8_000  # the fake's tokens: 32 KB of prompt
    chat = no_tree_chat(home, 400, SMALL)
    try:
        assert chat.core.view.shrinking and chat.core.view.size > 2 * SMALL.ceiling
        fake = AnthropicFake(summarizer(300), context_window=window)
        warnings: list[str] = []
        with anyio.fail_after(120), anyio.CancelScope() as scope:

            def stop(line: str) -> None:  # a refused request fails its node: no use going on
                warnings.append(line)
                scope.cancel()

            await compactor(chat, compactor_provider(fake), stop).run(until_built=True)
        refused = [(r.index, prompt_tokens(r)) for r in fake.records if r.status != 200]
        assert refused == [] and warnings == []
        assert max(prompt_tokens(r) for r in fake.records) <= window
        records = assert_built_once(chat.store.path, 400)
        assert not any(r.get("cut") for r in records)
    finally:
        chat.close()


@pytest.mark.anyio
async def test_a_context_is_trimmed_to_fit_the_compactors_window(home: Path) -> None:
    """A window of 12,000 tokens leaves room for less than the cview's 32,000 bytes: the oldest
    lines of each context are left out, the newest kept, and the reply's cap is a 24th of the
    window (here below the reply's cap, raised for the test)."""
    window = 12_000
    chat = Chat.open(home / "chat")
    rng = random.Random(31)
    for k in range(200):
        chat.append("user", text_of_size(rng, 700, f"m{k}"))
    seen: list[tuple[list[str], list[str]]] = []

    def check(call: Call) -> Any:
        whole = list(render_lines(chat.core.context(node_of(call)), chat.text_of))
        seen.append((context_of(call), whole))
        return summarizer(300)(call)

    fake = AnthropicFake(check, context_window=window)
    try:
        # one call at a time: the core's context is still the one the call was made from
        work = compactor(
            chat, compactor_provider(fake), context_window=window, concurrency=1, max_tokens=4_000
        )
        with anyio.fail_after(60):
            await work.run(until_built=True)
        assert all(r.status == 200 for r in fake.records)
        for record in fake.records:
            assert record.body is not None and record.body["max_tokens"] == window // 24
            assert prompt_tokens(record) + window // 24 <= window
        for sent, whole in seen:
            assert sent == whole[len(whole) - len(sent) :]  # the newest lines, ending as before
        assert sum(1 for sent, whole in seen if len(sent) < len(whole)) > 100
        assert max(sum(len(line) for line in whole) for _, whole in seen) > 25_000
    finally:
        chat.close()


@pytest.mark.anyio
async def test_a_node_whose_input_cannot_fit_is_cut_and_never_sent(home: Path) -> None:
    chat = Chat.open(home / "chat")
    rng = random.Random(32)
    chat.append("user", text_of_size(rng, 5_000, "m0"))  # fits a window of 8,000 tokens
    chat.append("user", text_of_size(rng, 15_000, "m1"))  # does not, with the prompt's 8 KB
    warnings: list[str] = []
    fake = AnthropicFake(summarizer(300), context_window=8_000)
    try:
        work = compactor(chat, compactor_provider(fake), warnings.append, context_window=8_000)
        with anyio.fail_after(30):
            await work.run(until_built=True)
        sent = [Call("anthropic", r.body or {}, r.index).input_text for r in fake.records]
        assert [text.split()[:2] for text in sent] == [["user:", "m0"], ["0+1|user:", "m0"]]
        records = {(r["l"], r["i"]): r for r in tree_records(chat.store.path)}
        assert records[(0, 1)].get("cut") and not records[(0, 0)].get("cut")
        assert records[(0, 1)]["text"].startswith("user: m1 ")
        assert warnings == [
            "memory: 1+1 is too long for the compactor model's window (8,000 tokens); its "
            "line is its first 512 bytes"
        ]
        assert work.calls == 2 and work.failed_at == {}
    finally:
        chat.close()


@pytest.mark.anyio
async def test_a_follow_up_that_would_not_fit_ends_the_size_loop(home: Path) -> None:
    """The first try fits, just; its line, sent back with the follow-up, would not: the line is
    cut as if the follow-up had not got shorter (SPEC §4.4)."""
    chat = Chat.open(home / "chat")
    chat.append("user", text_of_size(random.Random(33), 13_500, "m0"))
    fake = AnthropicFake(summarizer(7_000), context_window=8_000)
    try:
        work = compactor(chat, compactor_provider(fake), context_window=8_000)
        with anyio.fail_after(30):
            await work.run(until_built=True)
        assert len(fake.records) == 1 and fake.records[0].status == 200
        (record,) = tree_records(chat.store.path)
        assert not record.get("cut") and 1 <= record["size"] <= 512
    finally:
        chat.close()


@pytest.mark.anyio
async def test_an_over_long_reply_goes_back_cut(home: Path) -> None:
    """A small model rambles: its 7 KB line goes back in the follow-up cut to two lines' worth,
    marked as cut, so that the follow-up fits a small window (it overflowed it whole)."""
    chat = Chat.open(home / "chat")
    chat.append("user", text_of_size(random.Random(33), 3_000, "m0"))
    fake = AnthropicFake(summarizer([7_000, 400]), context_window=8_000)
    try:
        work = compactor(chat, compactor_provider(fake), context_window=8_000)
        with anyio.fail_after(30):
            await work.run(until_built=True)
        assert [r.status for r in fake.records] == [200, 200]
        second = Call("anthropic", fake.records[1].body or {}, 1)
        (sent_back,) = [text for role, text in second.turns if role == "assistant"]
        assert sent_back.endswith("[CUT: 5,976 more bytes of this reply are not shown]")
        assert len(sent_back.encode()) < 1_100
        (record,) = tree_records(chat.store.path)
        assert record["size"] == 400 and not record.get("cut")
    finally:
        chat.close()


@pytest.mark.anyio
async def test_the_status_says_how_fast_summaries_are_built(home: Path) -> None:
    """Summaries per second of busy time, from 8 summaries on: each call here takes 2 seconds
    of the compactor's clock, one at a time."""
    clock = FakeClock()
    chat = Chat.open(home / "chat")
    rng = random.Random(34)
    for k in range(12):
        chat.append("user", text_of_size(rng, 1_000, f"m{k}"))
    rates: list[float | None] = []

    def ticking(call: Call) -> Any:
        rates.append(work.status().rate)
        clock.advance(2.0)
        return summarizer(300)(call)

    work = compactor(chat, compactor_provider(AnthropicFake(ticking)), clock=clock, concurrency=1)
    try:
        with anyio.fail_after(30):
            await work.run(until_built=True)
        assert work.built == 22  # 12 leaves; 6, 3 and 1 merges
        assert rates[:8] == [None] * 8 and rates[8] == pytest.approx(0.5)
        assert work.status().rate == pytest.approx(0.5)
    finally:
        chat.close()
