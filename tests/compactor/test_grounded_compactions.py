"""The compactor checks every reply against its input (SPEC §4.8), caps a reply's output, and
sends an over-long reply back cut (SPEC §4.4), against the in-process Anthropic fake."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest
from test_service import (
    LONG,
    compactor_for,
    compactor_provider,
    failed,
    one_message_chat,
    settle,
    tree_records,
    until,
)

from evertalk.chat import Chat
from evertalk.compactor.service import Compactor
from evertalk.compactor.window import REPLY_TOKENS, THINKING_TOKENS, output_cap, thinks
from evertalk.ledger import Ledger, ledger_path, read_records
from fakes import AnthropicFake, Call, Script, constant, reply, summarizer
from fakes.behaviours import Outcome

pytestmark = pytest.mark.anyio

INVENTED = "user: your request was approved; ticket ZK3P9Q issued."
HEAD = re.compile(r"\d+\+\d+\|")


def assistant_texts(call: Call) -> list[str]:
    return [text for role, text in call.turns if role == "assistant"]


async def test_an_invented_line_is_rejected_and_asked_for_again(home: Path) -> None:
    """The follow-up, in the same conversation, names what the input lacks; the honest second
    line is kept. The ledger says why the first reply was rejected."""
    script = Script(summarizer(300)).push(reply(INVENTED))
    fake = AnthropicFake(script)
    chat = one_message_chat(home)
    ledger = Ledger(ledger_path(home))
    compactor = compactor_for(chat, compactor_provider(fake), ledger=ledger)
    try:
        with anyio.fail_after(20):
            await compactor.run(until_built=True)
        _, second = script.calls
        assert assistant_texts(second) == [INVENTED]
        assert second.last_user_text.startswith("Not true to the input: `ZK3P9Q` does not occur")
        (record,) = tree_records(chat.store.path)
        assert "ZK3P9Q" not in record["text"] and not record.get("cut")
        rejected = [r.rejected for r in read_records(ledger_path(home)).records]
        assert rejected == [
            "not in its input: ZK3P9Q; only 0 of its 4 content words are in its input",
            None,
        ]
        assert compactor.rejected == 1 and chat.core.failures == {}
    finally:
        ledger.close()
        chat.close()


async def test_a_model_that_only_invents_gets_its_node_cut_at_the_third_failure(
    home: Path,
) -> None:
    """Two rejected lines end a try as an unusable reply does: a failure, retried at the next
    message; the third builds the node from its cut input, which is true by construction."""
    script = Script(constant(reply(INVENTED)))
    fake = AnthropicFake(script)
    chat = one_message_chat(home)
    ledger = Ledger(ledger_path(home))
    warnings: list[str] = []
    compactor = compactor_for(chat, compactor_provider(fake), ledger=ledger, warn=warnings.append)
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(compactor.run)
            for failures in (1, 2):
                await until(failed(chat, (0, 0), failures))
                await settle(compactor)
                assert len(script.calls) == 2 * failures
                chat.append("user", f"short message {failures}")  # free: no call of its own
                compactor.message_logged()
            await until(lambda: chat.core.tree.is_built((0, 0)))
            await settle(compactor)
            group.cancel_scope.cancel()
        leaf_calls = [call for call in script.calls if not HEAD.match(call.input_text)]
        assert len(leaf_calls) == 6
        (record,) = [r for r in tree_records(chat.store.path) if (r["l"], r["i"]) == (0, 0)]
        assert record.get("cut") is True and record["text"] == LONG.encode()[:512].decode()
        assert [w for w in warnings if w.startswith("memory: 0+1 ")] == [
            "memory: 0+1 could not be summarized (the model's line was not true to its input "
            "(not in its input: ZK3P9Q; only 0 of its 4 content words are in its input)); it "
            "will be tried again"
        ]
        leaf_records = [r for r in read_records(ledger_path(home)).records if r.node == "0+1"]
        assert len(leaf_records) == 6 and all(r.rejected for r in leaf_records)
        assert compactor.rejected >= 6
    finally:
        ledger.close()
        chat.close()


def message(k: int) -> str:
    return f"m{k} note about item CODE{k}X{k}{k} " + "backup rsync cron nightly notes " * 20


def codes_dropped(call: Call) -> str:
    """A merge's words without the item codes: the codes are only in the leaves' lines."""
    words = [w for w in HEAD.sub(" ", call.input_text).split() if not re.search(r"\d", w)]
    return " ".join(words)[:300]


async def test_a_merge_may_draw_on_the_finer_lines_of_its_own_range(home: Path) -> None:
    """Message 5's code is in no line merged by 4+4, but in leaf 5's line in <chat>: the task
    says details of its messages may come from there. Message 2's is in <chat> too, but out of
    the merge's range: a line naming it is rejected."""
    chat = Chat.open(home / "chat")
    for k in range(8):
        chat.append("user", message(k))

    def behave(call: Call) -> Outcome:
        if call.input_text.startswith("4+2|"):
            code = "CODE2X22" if call.attempt == 1 else "CODE5X55"
            return reply(f"user: note about item {code} and nightly backup notes")
        if HEAD.match(call.input_text):
            return reply(codes_dropped(call))
        return summarizer(300)(call)  # long enough that no parent is free

    fake = AnthropicFake(behave)
    ledger = Ledger(ledger_path(home))
    compactor = compactor_for(chat, compactor_provider(fake), ledger=ledger)
    try:
        with anyio.fail_after(30):
            await compactor.run(until_built=True)
        lines = {(r["l"], r["i"]): r["text"] for r in tree_records(chat.store.path)}
        assert "CODE5X55" in lines[(2, 1)]
        merge = [r for r in read_records(ledger_path(home)).records if r.node == "4+4"]
        assert [r.rejected for r in merge] == ["not in its input: CODE2X22", None]
    finally:
        ledger.close()
        chat.close()


async def test_a_key_the_model_repeats_is_judged_as_it_would_be_stored(home: Path) -> None:
    """A reply is redacted before it is checked: a secret the model (or a proxy) adds is not
    in the input, but what is stored is `[redacted]`, which the input holds."""
    secret = "sk-live-REPEATED-0123456789abcdef"
    chat = one_message_chat(home, "the key was [redacted]; " + LONG[6:])
    fake = AnthropicFake(
        constant(reply(f"user: the key was {secret}; restore drill took 40 minutes"))
    )
    compactor = compactor_for(chat, compactor_provider(fake))
    compactor.secrets = [secret]
    try:
        with anyio.fail_after(20):
            await compactor.run(until_built=True)
        (record,) = tree_records(chat.store.path)
        assert record["text"] == "user: the key was [redacted]; restore drill took 40 minutes"
        assert len(fake.records) == 1
    finally:
        chat.close()


# -- the output cap -----------------------------------------------------------------------------


async def test_a_compaction_asks_for_about_a_thousand_tokens(home: Path) -> None:
    fake = AnthropicFake(summarizer(300))
    chat = one_message_chat(home)
    compactor = compactor_for(chat, compactor_provider(fake))
    try:
        with anyio.fail_after(20):
            await compactor.run(until_built=True)
        assert [r.body["max_tokens"] for r in fake.records if r.body] == [REPLY_TOKENS]
    finally:
        chat.close()


@pytest.mark.parametrize(
    ("effort", "local", "window", "cap"),
    [
        (None, False, 200_000, 1_000),
        ("none", False, 200_000, 1_000),
        ("high", False, 200_000, 16_000),  # a hosted model's thoughts count against the cap
        ("high", True, 200_000, 1_000),  # a local model is not asked to think
        ("high", True, 8_192, 341),  # a small window: the reply a 24th of it
        ("high", True, 2_048, 320),  # but never less than 320 tokens
        ("high", False, 4_096, 1_024),  # thoughts too: a quarter of the window at most
        ("high", False, 32_768, 8_192),
    ],
)
def test_the_output_cap(effort: str | None, local: bool, window: int, cap: int) -> None:
    assert output_cap(REPLY_TOKENS, window, thinks(effort, local)) == cap
    assert REPLY_TOKENS + THINKING_TOKENS == 16_000


async def rounds_until(chat: Chat, compactor: Compactor, done: Callable[[], bool]) -> None:
    """Let the compactor fail nodes, a new message after each round (failed nodes wait for
    one), until `done`."""
    for k in range(20):
        await settle(compactor)
        if done():
            return
        chat.append("user", f"short message {k}")  # free: no call of its own
        compactor.message_logged()
    raise AssertionError("the rounds never got there")


async def test_a_model_that_keeps_inventing_is_asked_once_per_node_and_its_nodes_cut(
    home: Path,
) -> None:
    """After 8 rejected lines of the latest 10, a node gets one call, and a rejected line cuts
    it at once; the user is told once. A model that invents nearly every time would otherwise
    cost six calls a node, minutes each on a small local server, for the same cut node."""
    script = Script(constant(reply(INVENTED)))
    fake = AnthropicFake(script)
    chat = Chat.open(home / "chat")
    for k in range(12):  # each over 512 bytes: a leaf that needs a call
        chat.append("user", f"note {k}: " + LONG[6:])
    warnings: list[str] = []
    compactor = compactor_for(chat, compactor_provider(fake), warn=warnings.append, concurrency=1)
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(compactor.run)
            await rounds_until(chat, compactor, lambda: compactor.untrusted)
            chat.append("user", "one more short message")
            compactor.message_logged()
            await until(lambda: chat.core.tree.unbuilt_count() == 0)
            await settle(compactor)
            group.cancel_scope.cancel()
        cut = [r for r in tree_records(chat.store.path) if r.get("cut")]
        # ten loops of a rejection and its follow-up, then at most one call for each node cut
        # (a node whose halves are both cut needs none)
        assert len(cut) > 12 and 20 < len(script.calls) <= 20 + len(cut)
        assert not [r for r in tree_records(chat.store.path) if not (r.get("cut") or r.get("free"))]
        told = [w for w in warnings if "failed the check against their input" in w]
        assert told == [
            "memory: the compactor model's lines failed the check against their input 10 "
            "times of the latest 10: each node is now asked once and cut from its input (a "
            "true excerpt) when its line fails; a stronger [memory] model would summarize them"
        ]
    finally:
        chat.close()


async def test_a_model_whose_lines_pass_again_is_trusted_again(home: Path) -> None:
    """Trust follows the latest lines: once fewer than 8 of the latest 10 failed, nodes get
    their follow-ups again."""
    lines = iter([INVENTED] * 20 + [None] * 100)  # None: a true line from the summarizer

    def answer(call: Call) -> Outcome:
        line = next(lines)
        return reply(line) if line is not None else summarizer(200)(call)

    fake = AnthropicFake(Script(answer))
    chat = Chat.open(home / "chat")
    for k in range(14):
        chat.append("user", f"note {k}: " + LONG[6:])
    warnings: list[str] = []
    compactor = compactor_for(chat, compactor_provider(fake), warn=warnings.append, concurrency=1)
    try:
        async with anyio.create_task_group() as group:
            group.start_soon(compactor.run)
            await rounds_until(chat, compactor, lambda: chat.core.tree.unbuilt_count() == 0)
            group.cancel_scope.cancel()
        trust = [w for w in warnings if "the check" in w]
        assert len(trust) == 2 and "failed the check" in trust[0]
        assert trust[1] == "memory: the compactor model's lines pass the check again"
        assert not compactor.untrusted
    finally:
        chat.close()
