"""The Anthropic fake's prompt cache, read through the usage the real SDK reports.

Every block here is 800 ASCII bytes, so 200 tokens: the prefix ending at block i (from 0) holds
200·(i+1) tokens, and the default minimum of 1024 tokens is reached at block 5.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

import anyio
import pytest

from fakes import AnthropicFake, FakeClock, Script, anthropic_async, chat, constant, reply, slow
from fakes.anthropic_fake import prompt_blocks

from .conftest import Expose

pytestmark = pytest.mark.anyio

BLOCK = 200  # tokens


def text(i: int, version: int = 0) -> str:
    return f"line block {i} version {version} ".ljust(800, "-")


def request(
    n: int, marks: Collection[int], *, changed: Collection[int] = (), model: str = "m"
) -> dict[str, Any]:
    content: list[dict[str, Any]] = []
    for i in range(n):
        block: dict[str, Any] = {"type": "text", "text": text(i, 1 if i in changed else 0)}
        if i in marks:
            block["cache_control"] = {"type": "ephemeral"}
        content.append(block)
    return {"model": model, "max_tokens": 20, "messages": [{"role": "user", "content": content}]}


async def usage(client: Any, params: dict[str, Any]) -> tuple[int, int, int]:
    """(cache_read, cache_write, input) of one call."""
    message = await client.messages.create(**params)
    u = message.usage
    return u.cache_read_input_tokens, u.cache_creation_input_tokens, u.input_tokens


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


async def test_the_same_prefix_twice_is_read_the_second_time(expose: Expose) -> None:
    fake = AnthropicFake()
    client = anthropic_async(expose(fake))
    assert await usage(client, request(31, {29})) == (0, 30 * BLOCK, BLOCK)
    assert await usage(client, request(31, {29})) == (30 * BLOCK, 0, BLOCK)
    # The whole conversation grows by 5 blocks and the mark moves to its new end.
    assert await usage(client, request(36, {34})) == (30 * BLOCK, 5 * BLOCK, BLOCK)
    await client.close()
    totals = fake.totals
    assert (totals.requests, totals.cache_read, totals.cache_write) == (3, 60 * BLOCK, 35 * BLOCK)
    assert totals.prompt == 31 * BLOCK * 2 + 36 * BLOCK


async def test_a_changed_block_reads_up_to_the_nearest_earlier_entry() -> None:
    client = anthropic_async(AnthropicFake())
    await usage(client, request(30, {9, 29}))  # entries after blocks 9 and 29
    # Block 20 changes: the mark at 29 looks back to 9 and finds the entry there.
    assert await usage(client, request(30, {29}, changed={20})) == (10 * BLOCK, 20 * BLOCK, 0)
    # Block 3 changes: nothing before it was ever written, so the whole prefix is written.
    assert await usage(client, request(30, {29}, changed={3})) == (0, 30 * BLOCK, 0)
    await client.close()


@pytest.mark.parametrize(("mark", "reachable"), [(29, True), (30, False), (39, False)])
async def test_an_entry_more_than_20_blocks_before_every_mark_is_out_of_reach(
    mark: int, reachable: bool
) -> None:
    client = anthropic_async(AnthropicFake())
    await usage(client, request(10, {9}))  # one entry after block 9
    read, write, _ = await usage(client, request(40, {mark}))
    assert read == (10 * BLOCK if reachable else 0)
    assert read + write == (mark + 1) * BLOCK
    await client.close()


async def test_a_second_mark_20_blocks_back_keeps_an_old_entry_in_reach() -> None:
    client = anthropic_async(AnthropicFake())
    await usage(client, request(10, {9}))
    assert await usage(client, request(40, {29, 39})) == (10 * BLOCK, 30 * BLOCK, 0)
    await client.close()


async def test_entries_live_five_minutes_from_their_last_use(clock: FakeClock) -> None:
    client = anthropic_async(AnthropicFake(clock=clock))
    await usage(client, request(10, {9}))
    clock.advance(299)
    assert (await usage(client, request(10, {9})))[0] == 10 * BLOCK  # the read restarts its life
    clock.advance(299)
    assert (await usage(client, request(10, {9})))[0] == 10 * BLOCK
    clock.advance(300)
    assert await usage(client, request(10, {9})) == (0, 10 * BLOCK, 0)
    await client.close()


async def test_an_entry_is_readable_only_once_the_response_writing_it_has_started() -> None:
    script = Script(chat("fast")).push(slow(0.5, chat("slow")))
    fake = AnthropicFake(script)
    client = anthropic_async(fake)
    results: dict[str, tuple[int, int, int]] = {}

    async def first() -> None:
        results["first"] = await usage(client, request(10, {9}))

    async with anyio.create_task_group() as group:
        group.start_soon(first)
        while not fake.records:  # the first request has arrived and waits to respond
            await anyio.sleep(0.005)
        results["second"] = await usage(client, request(10, {9}))
        assert not fake.records[0].started
    # Both paid for the same entry: this is what SPEC's prefix gate avoids.
    assert results["first"] == results["second"] == (0, 10 * BLOCK, 0)
    await client.close()


async def test_an_entry_is_readable_while_its_response_still_streams() -> None:
    script = Script(chat("fast")).push(constant(reply("x" * 200, chunk_delay=0.03)))
    fake = AnthropicFake(script, text_chunk=10)
    client = anthropic_async(fake)

    async def first() -> None:
        async with client.messages.stream(**request(10, {9})) as stream:
            await stream.until_done()

    async with anyio.create_task_group() as group:
        group.start_soon(first)
        while not (fake.records and fake.records[0].started):
            await anyio.sleep(0.005)
        assert await usage(client, request(10, {9})) == (10 * BLOCK, 0, 0)
        assert not fake.records[0].finished
    await client.close()


async def test_nothing_is_written_below_the_minimum_length() -> None:
    client = anthropic_async(AnthropicFake())
    assert await usage(client, request(5, {4})) == (0, 0, 5 * BLOCK)  # 1000 < 1024 tokens
    assert await usage(client, request(5, {4})) == (0, 0, 5 * BLOCK)
    assert await usage(client, request(6, {4, 5})) == (0, 6 * BLOCK, 0)  # only block 5 is written
    await client.close()
    lower = anthropic_async(AnthropicFake(min_cache_tokens=500))
    assert await usage(lower, request(5, {4})) == (0, 5 * BLOCK, 0)
    await lower.close()


async def test_caches_are_per_model() -> None:
    client = anthropic_async(AnthropicFake())
    await usage(client, request(10, {9}, model="big"))
    assert (await usage(client, request(10, {9}, model="small")))[0] == 0
    assert (await usage(client, request(10, {9}, model="big")))[0] == 10 * BLOCK
    await client.close()


async def test_tools_and_system_survive_a_change_of_tool_choice() -> None:
    """Compactions send tool_choice none where turns send auto: they share tools and system."""
    client = anthropic_async(AnthropicFake())
    tools = [{"name": "zoom", "description": "Expand a line.", "input_schema": {"type": "object"}}]
    long_text = text(99).ljust(5000, "=")  # 1250 tokens: over the minimum on its own
    system = [{"type": "text", "text": long_text, "cache_control": {"type": "ephemeral"}}]
    prefix = prompt_blocks({"tools": tools, "system": system, "messages": []})
    shared = sum(block.tokens for block in prefix)
    turn = {**request(10, {9}), "tools": tools, "system": system}
    read, write, _ = await usage(client, turn)
    assert (read, write) == (0, shared + 10 * BLOCK)
    compaction = {**turn, "tool_choice": {"type": "none"}}
    assert (await usage(client, compaction))[:2] == (shared, 10 * BLOCK)
    await client.close()


async def test_fake_records_keep_the_raw_request_bytes() -> None:
    fake = AnthropicFake()
    client = anthropic_async(fake)
    await usage(client, request(2, {1}))
    await client.close()
    record = fake.records[0]
    assert record.body == request(2, {1})
    assert text(1).encode() in record.raw
    assert (record.cache_write, record.input_tokens) == (0, 2 * BLOCK)
