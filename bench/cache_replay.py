"""The cache figure: replay a chat with turns and the compactor against the Anthropic fake.

`python -m bench.cache_replay [MESSAGES]` (default 3,000), also run by `make bench`.

A fresh chat in a temporary folder gets MESSAGES messages of realistic mixed sizes while the
compactor runs (8 in parallel) through the real `AnthropicProvider`, a `GatedProvider` with one
`PrefixGate` keyed by `layout.prefix_keys`, and the in-process `AnthropicFake` with its cache
model. Each user message starts a turn, as in SPEC §6.1: wait until the view is settled (the
turn's unbuilt lines first), render the view, log the message, send the turn's request through
the same provider, and log the reply as `ever`. Between a turn's message and its reply the
driver logs the turn's tool work (`tool` and `echo` messages, some of several KB); their own
model calls are not sent, since each would read the turn's view from the entry its first call
just wrote and only flatter the figure.

The share read from the cache is cache_read / (input + cache_read + cache_write), from the
fake's per-request records, separately for turns and compactions (a compaction is a request
with `tool_choice` none), in the fake's tokens (ceil(bytes / 4) per block) and in bytes of the
blocks as the fake's cache sees them. The fake's clock advances a few seconds per message, so
the 5-minute lifetime holds as it would in a lively chat whatever the speed of the machine.
"""

from __future__ import annotations

import hashlib
import random
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import anyio

from evertalk.chat import Chat
from evertalk.compactor.service import Compactor, CompactorSettings
from evertalk.config import DEFAULT_MODELS, MemoryConfig, TurnConfig
from evertalk.memory import Node
from evertalk.prompts import TOOLS, system_text, turn_header
from evertalk.providers.anthropic import AnthropicProvider
from evertalk.providers.base import Text, collect
from evertalk.providers.gate import GatedProvider, PrefixGate
from evertalk.providers.layout import prefix_keys, turn_request

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))  # for the fakes

from fakes import (
    IN_PROCESS_URL,
    AnthropicFake,
    Behaviour,
    Call,
    Fail,
    FakeClock,
    Reply,
    RequestRecord,
    async_client,
    summarizer,
)
from fakes import Text as FakeText
from fakes.anthropic_fake import prompt_blocks
from fakes.common import canonical

TURN_MODEL, MEMORY_MODEL = DEFAULT_MODELS["anthropic"]
TURN_MAX_TOKENS = 16_000
SETTLE_TIMEOUT = MemoryConfig().settle_timeout  # seconds a turn waits for its lines (SPEC §6.1)
DRAIN_TIMEOUT = 60.0  # seconds the compactor gets to build what the last messages made
SECONDS_PER_MESSAGE = 4.0  # the fake clock's step per logged message
TOOL_PAIRS = (0, 0, 0, 1, 1, 2, 3)  # tool calls (a `tool` and an `echo` message each) per turn
START = datetime(2026, 11, 30, 9, 0, tzinfo=timezone(timedelta(hours=1)))

_VOCABULARY = (
    "the log rotate backup notes file error fixed config tests view merge shell script cron "
    "nightly path home user wants asks why because then after before deploy server build "
    "python module import function class returns value list dict key cache prefix token "
    "request reply model summary line bytes size limit disk folder permission owner read "
    "write edit patch diff commit branch review docs install package version upgrade lock "
    "timeout retry network proxy port socket database query index table schema migration"
)
WORDS = _VOCABULARY.split()


# -- the chat's messages ------------------------------------------------------------------


def words(rng: random.Random, size: int) -> str:
    """About `size` bytes of prose, with a line break now and then."""
    out: list[str] = []
    used = 0
    while used < size:
        word = rng.choice(WORDS)
        if out and rng.random() < 0.02:
            word = "\n" + word
        out.append(word)
        used += len(word) + 1
    return " ".join(out)


def user_text(rng: random.Random) -> str:
    return words(rng, rng.randrange(50, 400))


def tool_call(rng: random.Random) -> tuple[str, str]:
    """A `tool` message (name, space, compact JSON input) and its `echo` result."""
    name = rng.choice(("shell", "shell", "read", "edit", "zoom"))
    argument = words(rng, rng.randrange(20, 240)).replace("\n", " ")
    roll = rng.random()
    if roll < 0.5:
        output = rng.randrange(40, 600)
    elif roll < 0.85:
        output = rng.randrange(600, 3_000)
    else:
        output = rng.randrange(3_000, 12_000)
    return f'{name} {{"input":"{argument}"}}', f"{name}: {words(rng, output)}"


def turn_reply(rng: random.Random) -> Behaviour:
    """Ever's reply to a turn: 200–2,000 bytes of prose."""

    def behave(call: Call) -> Reply:
        return Reply(pieces=(FakeText(words(rng, rng.randrange(200, 2_000))),))

    return behave


def line_length(rng: random.Random) -> Callable[[int], int]:
    """A summarizer's line length by attempt: 150–500 bytes; one first try in six too long
    (530–900 bytes), then a follow-up that fits."""

    def length(attempt: int) -> int:
        if attempt == 1 and rng.random() < 1 / 6:
            return rng.randrange(530, 900)
        return rng.randrange(150, 500)

    return length


def compaction_reply(call: Call) -> Reply | Fail:
    """The summarizer, its line length drawn from the request's input and attempt, so that a
    node gets the same line whatever order the parallel calls arrive in."""
    seed = hashlib.sha256(f"{call.attempt}|{call.input_text}".encode()).digest()
    return summarizer(line_length(random.Random(seed)))(call)


def is_compaction(body: dict[str, Any] | None) -> bool:
    return body is not None and (body.get("tool_choice") or {}).get("type") == "none"


def behaviour(rng: random.Random) -> Behaviour:
    answer = turn_reply(rng)
    return lambda call: compaction_reply(call) if is_compaction(call.body) else answer(call)


# -- the figures --------------------------------------------------------------------------


@dataclass
class Share:
    """Prompt tokens and bytes read from the cache, written to it, and sent uncached; and the
    bytes of the prefix (tools, system, the view or context up to `</chat>`) read and sent."""

    calls: int = 0
    tokens: list[int] = field(default_factory=lambda: [0, 0, 0])  # read, write, input
    bytes: list[int] = field(default_factory=lambda: [0, 0, 0])
    prefix: list[int] = field(default_factory=lambda: [0, 0])  # read, not read

    def add(self, record: RequestRecord) -> None:
        assert record.body is not None
        self.calls += 1
        read, write = record.cache_read, record.cache_write
        for i, value in enumerate((read, write, record.input_tokens)):
            self.tokens[i] += value
        blocks, sizes = prompt_blocks(record.body), block_bytes(record.body)
        prefix = prefix_length(record.body)
        before = 0
        for i, (block, size) in enumerate(zip(blocks, sizes, strict=True)):
            # the blocks read come first, then those written, then the uncached input
            part = 0 if before < read else 1 if before < read + write else 2
            self.bytes[part] += size
            if i < prefix:
                self.prefix[min(part, 1)] += size
            before += block.tokens

    @staticmethod
    def _read(values: list[int]) -> float:
        total = sum(values)
        return values[0] / total if total else 0.0

    @property
    def token_share(self) -> float:
        return self._read(self.tokens)

    @property
    def byte_share(self) -> float:
        return self._read(self.bytes)

    @property
    def prefix_share(self) -> float:
        return self._read(self.prefix)


@dataclass
class Tally:
    """The fake's records, counted as they finish; each one's bodies are dropped once counted,
    so that a long replay does not keep every prompt in memory."""

    turn: Share = field(default_factory=Share)
    compaction: Share = field(default_factory=Share)
    refused: int = 0
    counted: int = 0  # records[:counted] are all counted
    seen: set[int] = field(default_factory=set)  # counted records at or after `counted`

    def take(self, records: list[RequestRecord], final: bool = False) -> None:
        for record in records[self.counted :]:
            if record.index in self.seen or not (final or record.finished or record.status != 200):
                continue
            if record.status == 200:
                (self.compaction if is_compaction(record.body) else self.turn).add(record)
            else:
                self.refused += 1
            record.raw, record.body = b"", None
            self.seen.add(record.index)
        while self.counted in self.seen:
            self.seen.discard(self.counted)
            self.counted += 1


def prefix_length(body: dict[str, Any]) -> int:
    """The blocks of `prompt_blocks(body)` up to the view's (or context's) last piece."""
    system, content = body.get("system"), body["messages"][0]["content"]
    if isinstance(content, str):
        content = [{"type": "text", "text": content}]
    view = next(i for i, block in enumerate(content) if block.get("text", "").endswith("</chat>"))
    systems = 1 if isinstance(system, str) else len(system or [])
    return len(body.get("tools") or []) + systems + view + 1


def block_bytes(body: dict[str, Any]) -> list[int]:
    """The UTF-8 bytes of each block of `prompt_blocks(body)`, in the same order: a text's own
    bytes, any other block's canonical JSON (as the fake counts its tokens)."""

    def size(block: object) -> int:
        if isinstance(block, dict):
            clean = {k: v for k, v in block.items() if k != "cache_control"}
            text = clean.get("text", clean.get("thinking"))
            return len((text if isinstance(text, str) else canonical(clean)).encode())
        return len(canonical(block).encode())

    def content(value: object) -> list[Any]:
        if isinstance(value, str):
            return [{"type": "text", "text": value}]
        return value if isinstance(value, list) else []

    sizes = [size(tool) for tool in body.get("tools") or []]
    sizes += [size(block) for block in content(body.get("system"))]
    for message in body["messages"]:
        sizes += [size(block) for block in content(message.get("content"))]
    return sizes


@dataclass
class Result:
    messages: int
    turns: int
    seconds: float
    turn: Share
    compaction: Share
    compactor_calls: int
    built: int
    settle_timeouts: int
    settle_max_s: float
    refused: int  # requests the fake did not answer with 200
    unbuilt: int  # nodes left unbuilt at the end
    last_error: str | None  # the compactor's last failure, if any

    def line(self) -> str:
        return (
            f"cache ({self.messages:,} messages, {self.turns} turns): turns read "
            f"{self.turn.token_share:.1%} of prompt tokens from the cache, compactions "
            f"{self.compaction.token_share:.1%}; "
            f"{self.compactor_calls / max(self.built, 1):.2f} compactor calls per built node, "
            f"{self.compactor_calls / max(self.messages, 1):.2f} per message"
        )

    def detail(self) -> str:
        return (
            f"  bytes read from the cache: turns {self.turn.byte_share:.1%}, compactions "
            f"{self.compaction.byte_share:.1%}; of the prefix bytes (tools, system, view or "
            f"context): turns {self.turn.prefix_share:.1%}, compactions "
            f"{self.compaction.prefix_share:.1%}\n"
            f"  {self.turn.calls} turn and {self.compaction.calls} compaction calls, "
            f"{self.built} model-built nodes; settle wait max {self.settle_max_s:.2f} s, "
            f"{self.settle_timeouts} timeouts; {self.seconds:.0f} s" + self._problems()
        )

    def _problems(self) -> str:
        if not (self.refused or self.unbuilt or self.last_error):
            return ""
        return (
            f"\n  PROBLEMS: {self.refused} requests refused, {self.unbuilt} nodes left unbuilt, "
            f"last compactor error: {self.last_error}"
        )


# -- the replay ---------------------------------------------------------------------------


def unbuilt_lines(chat: Chat) -> list[Node]:
    tree = chat.core.tree
    return [node for node in chat.core.view.nodes() if not tree.is_built(node)]


async def settle(chat: Chat, compactor: Compactor) -> tuple[float, bool]:
    """Wait until every line of the view is built, the turn's lines first; (seconds, settled)."""
    started = time.perf_counter()
    compactor.waiting = True
    try:
        with anyio.move_on_after(SETTLE_TIMEOUT):
            while lines := unbuilt_lines(chat):
                compactor.prioritize(lines)
                await anyio.sleep(0.002)
            return time.perf_counter() - started, True
        return time.perf_counter() - started, False
    finally:
        compactor.waiting = False
        compactor.prioritize([])


async def replay_async(messages: int, seed: int) -> Result:
    rng = random.Random(seed)
    clock = FakeClock()
    epoch = clock()
    fake = AnthropicFake(behaviour(random.Random(seed + 1)), clock=clock)
    inner = AnthropicProvider("bench-key", IN_PROCESS_URL, http_client=async_client(fake))
    provider = GatedProvider(inner, PrefixGate(), prefix_keys)
    system = system_text("")
    memory = MemoryConfig()
    settings = CompactorSettings(
        model=MEMORY_MODEL, effort=memory.effort or None, concurrency=memory.concurrency
    )
    turn_effort = TurnConfig().effort
    tally = Tally()
    turns = timeouts = 0
    settle_max = 0.0
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="evertalk-cache-") as folder:
        chat = Chat.open(Path(folder) / "chat")
        compactor = Compactor(chat, provider, settings, system=system, tools=TOOLS)

        def log(kind: str, text: str) -> None:
            chat.append(kind, text)
            clock.advance(SECONDS_PER_MESSAGE)
            compactor.message_logged()

        try:
            async with anyio.create_task_group() as group:
                group.start_soon(compactor.run)
                while chat.t + 2 <= messages:  # a turn logs at least its message and reply
                    waited, settled = await settle(chat, compactor)
                    settle_max = max(settle_max, waited)
                    timeouts += not settled
                    view = chat.render_view()
                    message = user_text(rng)
                    log("user", message)
                    now = START + timedelta(seconds=clock() - epoch)
                    tail = [Text(turn_header(now) + "\n" + message)]
                    request = turn_request(
                        TURN_MODEL, system, TOOLS, view, tail, [], TURN_MAX_TOKENS, turn_effort
                    )
                    finished = await collect(provider, request)
                    turns += 1
                    for _ in range(rng.choice(TOOL_PAIRS)):
                        if chat.t + 3 > messages:  # room for the pair and the reply
                            break
                        call, result = tool_call(rng)
                        log("tool", call)
                        log("echo", result)
                    log("ever", finished.text)
                    tally.take(fake.records)
                with anyio.move_on_after(DRAIN_TIMEOUT):  # the nodes the last messages made
                    while compactor.unbuilt() or compactor.in_flight:
                        await anyio.sleep(0.01)
                group.cancel_scope.cancel()
        finally:
            unbuilt = compactor.unbuilt()
            chat.close()
            await provider.aclose()
    tally.take(fake.records, final=True)
    return Result(
        messages=chat.t,
        turns=turns,
        seconds=time.perf_counter() - started,
        turn=tally.turn,
        compaction=tally.compaction,
        compactor_calls=compactor.calls,
        built=compactor.built,
        settle_timeouts=timeouts,
        settle_max_s=settle_max,
        refused=tally.refused,
        unbuilt=unbuilt,
        last_error=compactor.last_error,
    )


def run(messages: int = 3_000, seed: int = 5) -> Result:
    result: Result = anyio.run(replay_async, messages, seed)
    return result


def main() -> int:
    result = run(int(sys.argv[1]) if len(sys.argv) > 1 else 3_000)
    print(result.line())
    print(result.detail())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
