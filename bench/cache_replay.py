"""The cache figure: replay a chat of real turns and the compactor against the Anthropic fake.

`python -m bench.cache_replay [MESSAGES]` (default 3,000), also run by `make bench`.

The real `Agent` runs in a temporary home: its turns (settle wait, view, header, tool loop,
logging as it happens) and its compactor (8 in parallel), through the real `AnthropicProvider`
behind one `PrefixGate`, against the in-process `AnthropicFake` with its cache model. The driver
types a message whenever the agent is idle. The fake answers a turn's calls with zero to three
`read` calls of files it writes (40 bytes to 12 KB, so the `echo` messages vary as real tool
output does), a short remark before some of them, then a final reply of 200–2,000 bytes.

The share read from the cache is cache_read / (input + cache_read + cache_write), from the
fake's per-request records, separately for turns and compactions (a compaction is a request with
`tool_choice` none), in the fake's tokens (ceil(bytes / 4) per block) and in bytes of the blocks
as the fake's cache sees them. Turns are counted twice: every call they make, and their opening
calls alone (the call that sends a new view; the tool loop's later calls send the same view and
read it whole). The fake's clock advances a few seconds per logged message, so the 5-minute
lifetime holds as it would in a lively chat whatever the speed of the machine.

`first_turns()` (also run by `make bench`, or `python -m bench.cache_replay first`) replays only
the first 10 turns of 5 new chats, whose cache holds nothing yet, and gives the turns' shares for
them together and turn by turn.
"""

from __future__ import annotations

import hashlib
import math
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

from evertalk.agent.session import Agent
from evertalk.config import DEFAULT_MODELS
from evertalk.protocol import events
from evertalk.providers.anthropic import AnthropicProvider
from evertalk.providers.gate import GatedProvider, PrefixGate
from evertalk.providers.layout import prefix_keys

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
from fakes.behaviours import ToolCall
from fakes.common import canonical

TURN_MODEL, MEMORY_MODEL = DEFAULT_MODELS["anthropic"]
DRAIN_TIMEOUT = 60.0  # seconds the compactor gets to build what the last messages made
SECONDS_PER_MESSAGE = 4.0  # the fake clock's step per logged message
TOOL_CALLS = (0, 0, 0, 1, 1, 2, 3)  # `read` calls per turn, drawn at the turn's first call
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


def output_size(rng: random.Random) -> int:
    """A tool output's size: mostly short, some of a few KB, one in seven up to 12 KB."""
    roll = rng.random()
    if roll < 0.5:
        return rng.randrange(40, 600)
    if roll < 0.85:
        return rng.randrange(600, 3_000)
    return rng.randrange(3_000, 12_000)


@dataclass
class TurnModel:
    """The turns' side of the fake model. The driver waits for each turn to end before it types
    the next message, so the calls of one turn arrive one after another and one plan serves."""

    rng: random.Random
    workdir: Path
    remaining: int = 0  # `read` calls still to make in this turn
    files: int = 0

    def __call__(self, call: Call) -> Reply:
        if len(call.body["messages"]) == 1:  # a turn's opening call
            self.remaining = self.rng.choice(TOOL_CALLS)
        if self.remaining == 0:
            return Reply(pieces=(FakeText(words(self.rng, self.rng.randrange(200, 2_000))),))
        self.remaining -= 1
        self.files += 1
        name = f"notes-{self.files}.txt"
        (self.workdir / name).write_text(words(self.rng, output_size(self.rng)) + "\n")
        read = ToolCall("read", {"path": name})
        if self.rng.random() < 0.5:
            return Reply(pieces=(FakeText(words(self.rng, self.rng.randrange(40, 200))), read))
        return Reply(pieces=(read,))


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


def behaviour(turns: TurnModel) -> Behaviour:
    return lambda call: compaction_reply(call) if is_compaction(call.body) else turns(call)


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

    turn: Share = field(default_factory=Share)  # every call of the turns
    opening: Share = field(default_factory=Share)  # their opening calls alone
    compaction: Share = field(default_factory=Share)
    by_turn: list[Share] = field(default_factory=list)  # every call, turn by turn
    refused: int = 0
    counted: int = 0  # records[:counted] are all counted
    seen: set[int] = field(default_factory=set)  # counted records at or after `counted`

    def _add(self, record: RequestRecord) -> None:
        assert record.body is not None
        if is_compaction(record.body):
            self.compaction.add(record)
            return
        self.turn.add(record)
        if len(record.body["messages"]) == 1:
            self.opening.add(record)
            self.by_turn.append(Share())
        # the driver waits for each turn to end, so a turn's calls come before the next opening
        self.by_turn[-1].add(record)

    def take(self, records: list[RequestRecord], final: bool = False) -> None:
        for record in records[self.counted :]:
            if record.index in self.seen or not (final or record.finished or record.status != 200):
                continue
            if record.status == 200:
                self._add(record)
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
    opening: Share
    compaction: Share
    by_turn: list[Share]
    compactor_calls: int
    built: int
    settle_timeouts: int
    settle_max_s: float
    refused: int  # requests the fake did not answer with 200
    unbuilt: int  # nodes left unbuilt at the end
    last_error: str | None  # the compactor's last failure, if any

    def line(self) -> str:
        return (
            f"cache ({self.messages:,} messages, {self.turns} turns): of the prefix bytes "
            f"(tools, system, view or context), turns read {self.turn.prefix_share:.1%} from "
            f"the cache, compactions {self.compaction.prefix_share:.1%}; "
            f"{self.compactor_calls / max(self.built, 1):.2f} compactor calls per built node, "
            f"{self.compactor_calls / max(self.messages, 1):.2f} per message"
        )

    def detail(self) -> str:
        rows: tuple[tuple[str, Share], ...] = (
            ("turns, every call", self.turn),
            ("turns, opening calls", self.opening),
            ("compactions", self.compaction),
        )
        table = "\n".join(
            f"  {name:<21} {share.calls:>5} calls: prefix bytes {share.prefix_share:.1%}, "
            f"prompt bytes {share.byte_share:.1%}, prompt tokens {share.token_share:.1%}"
            for name, share in rows
        )
        return (
            f"  read from the cache, by request kind:\n{table}\n"
            f"  {self.built} model-built nodes; settle wait max {self.settle_max_s:.2f} s, "
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


def write_home(home: Path) -> None:
    home.mkdir(mode=0o700)
    config = (
        f'provider = "anthropic"\nmodel = "{TURN_MODEL}"\n\n[memory]\nmodel = "{MEMORY_MODEL}"\n'
    )
    (home / "config.toml").write_text(config)


@dataclass
class Watch:
    """Turns and settle waits, from the agent's events."""

    turns: int = 0
    timeouts: int = 0
    settle_max: float = 0.0
    settling_since: float | None = None
    limit: float = math.inf

    async def follow(self, agent: Agent) -> None:
        async for event in agent.events():
            now = time.perf_counter()
            if isinstance(event, events.Settling) and self.settling_since is None:
                self.settling_since = now
            elif isinstance(event, events.TurnStarted):
                self.turns += 1
                if self.settling_since is not None:
                    waited = now - self.settling_since
                    self.settle_max = max(self.settle_max, waited)
                    self.timeouts += waited >= self.limit
                self.settling_since = None
            elif isinstance(event, events.TurnEnded) and event.reason != "done":
                raise RuntimeError(f"a turn ended with {event.reason}: {event.error}")


async def replay_async(messages: int, seed: int, turns: float = math.inf) -> Result:
    """Replay until `messages` are logged or `turns` messages are typed, whichever comes first."""
    rng = random.Random(seed)
    clock = FakeClock()
    epoch = clock()
    tally = Tally()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="evertalk-cache-") as folder:
        home, workdir = Path(folder) / "home", Path(folder) / "work"
        write_home(home)
        workdir.mkdir()
        fake = AnthropicFake(behaviour(TurnModel(random.Random(seed + 1), workdir)), clock=clock)
        inner = AnthropicProvider("bench-key", IN_PROCESS_URL, http_client=async_client(fake))
        provider = GatedProvider(inner, PrefixGate(), prefix_keys)
        watch = Watch()
        try:
            async with Agent.open(
                home,
                asker=None,
                provider=provider,
                workdir=workdir,
                clock=lambda: START + timedelta(seconds=clock() - epoch),
            ) as agent:
                watch.limit = agent.runtime.config.memory.settle_timeout - 0.5
                async with anyio.create_task_group() as group:
                    group.start_soon(watch.follow, agent)
                    typed = 0
                    # a turn logs its message and reply
                    while agent.chat.t + 2 <= messages and typed < turns:
                        typed += 1
                        before = agent.chat.t
                        agent.submit(user_text(rng))
                        await agent.wait_idle()
                        clock.advance(SECONDS_PER_MESSAGE * (agent.chat.t - before))
                        tally.take(fake.records)
                    compactor = agent.compactor
                    with anyio.move_on_after(DRAIN_TIMEOUT):  # the last messages' nodes
                        while compactor.unbuilt() or compactor.in_flight:
                            await anyio.sleep(0.01)
                    unbuilt, count = compactor.unbuilt(), agent.chat.t
                    group.cancel_scope.cancel()
        finally:
            await provider.aclose()
    tally.take(fake.records, final=True)
    return Result(
        messages=count,
        turns=watch.turns,
        seconds=time.perf_counter() - started,
        turn=tally.turn,
        opening=tally.opening,
        compaction=tally.compaction,
        by_turn=tally.by_turn,
        compactor_calls=compactor.calls,
        built=compactor.built,
        settle_timeouts=watch.timeouts,
        settle_max_s=watch.settle_max,
        refused=tally.refused,
        unbuilt=unbuilt,
        last_error=compactor.last_error,
    )


def run(messages: int = 3_000, seed: int = 5) -> Result:
    result: Result = anyio.run(replay_async, messages, seed)
    return result


def total(shares: list[Share]) -> Share:
    """The shares' calls, tokens and bytes added up."""
    out = Share()
    for share in shares:
        out.calls += share.calls
        for mine, theirs in zip(
            (out.tokens, out.bytes, out.prefix),
            (share.tokens, share.bytes, share.prefix),
            strict=True,
        ):
            mine[:] = [a + b for a, b in zip(mine, theirs, strict=True)]
    return out


@dataclass
class FirstTurns:
    """The first turns of a few new chats, each against a cache that holds nothing yet."""

    results: list[Result]

    def line(self) -> str:
        turns = min(len(result.by_turn) for result in self.results)
        every = total([result.turn for result in self.results])
        opening = total([result.opening for result in self.results])
        by_turn = [total([result.by_turn[n] for result in self.results]) for n in range(turns)]
        shares = ", ".join(f"{share.token_share:.0%}" for share in by_turn)
        problems = "".join(result._problems() for result in self.results)
        return (
            f"cache, first {turns} turns of {len(self.results)} new chats: turns read "
            f"{every.token_share:.1%} of their prompt tokens from the cache (opening calls "
            f"{opening.token_share:.1%}; prefix bytes {every.prefix_share:.1%}); "
            f"by turn: {shares}{problems}"
        )


def first_turns(turns: int = 10, chats: int = 5, seed: int = 5) -> FirstTurns:
    """The first `turns` turns of `chats` new chats (seeds `seed`, `seed` + 1, ...): the tool
    calls a turn makes move a single chat's figures a lot."""
    results: list[Result] = [
        anyio.run(replay_async, 10 * turns, seed + n, turns) for n in range(chats)
    ]
    return FirstTurns(results)


def main() -> int:
    if sys.argv[1:] == ["first"]:
        print(first_turns().line())
        return 0
    result = run(int(sys.argv[1]) if len(sys.argv) > 1 else 3_000)
    print(result.line())
    print(result.detail())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
