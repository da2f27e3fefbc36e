"""Catching up: a 3,000-message chat with no summaries, compacted to the end.

`python -m bench.catchup [MESSAGES]` (default 3,000), also run by `make bench`.

What an import, a long time offline or a lost tree leaves: every message logged, only the free
nodes built. The chat is made with the real `Chat` (messages of a real chat's sizes: prose of 50
bytes to 5 KB, tool calls, tool outputs up to 12 KB), then the real `Compactor` builds every
node as `evertalk memory compact` does, through the real `AnthropicProvider` behind one
`PrefixGate`, against the in-process `AnthropicFake` with its cache model, 8 calls at once; and
the batch left waiting is resumed as the command resumes it.

The figures: the wall time; the compaction calls; the prompt tokens of all of them (uncached,
read and written, in the fake's tokens: ceil(bytes / 4) per block) and their price at the
compaction model's rates; the largest request and how many were over 200,000 tokens, the window
of the current Anthropic models (the real API refuses them); the calls made before a batch run
then would have brought the view to its ceiling and to its floor; and the view's size at the end.
"""

from __future__ import annotations

import random
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import anyio
from starlette.types import ASGIApp, Receive, Scope, Send

from bench.cache_replay import compaction_reply, output_size, words
from evertalk.chat import Chat
from evertalk.compactor.service import Compactor, CompactorSettings
from evertalk.config import DEFAULT_MODELS
from evertalk.memory import MemoryCore
from evertalk.prompts import TOOLS, system_text
from evertalk.providers.anthropic import AnthropicProvider
from evertalk.providers.base import Usage
from evertalk.providers.gate import GatedProvider, PrefixGate
from evertalk.providers.layout import prefix_keys
from evertalk.providers.prices import cost

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))  # for the fakes

from fakes import IN_PROCESS_URL, AnthropicFake, RequestRecord, async_client

MEMORY_MODEL = DEFAULT_MODELS["anthropic"][1]
WINDOW = 200_000  # tokens: the context window of the current Anthropic models


def message(rng: random.Random) -> tuple[str, str]:
    """One message as a chat has them: the user's words (50 B – 1 KB), Ever's replies (200 B –
    5 KB), tool calls (80–600 B) and their outputs (40 B – 12 KB)."""
    roll = rng.random()
    if roll < 0.25:
        return "user", words(rng, rng.randrange(50, 1_000))
    if roll < 0.5:
        return "ever", words(rng, rng.randrange(200, 5_000))
    if roll < 0.75:
        return "tool", 'read {"path": "' + words(rng, rng.randrange(80, 600)) + '"}'
    return "echo", words(rng, output_size(rng))


@dataclass
class Watch:
    """An ASGI wrapper that looks at the memory as each request arrives: by then every line a
    call landed before it has been built. `ceiling_at` and `floor_at`: how many requests had
    arrived when a batch run then would first have brought the view to its ceiling, its floor."""

    app: ASGIApp
    core: MemoryCore
    requests: int = 0
    ceiling_at: int | None = None
    floor_at: int | None = None
    sizes: list[int] = field(default_factory=list)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        self.requests += 1
        if self.floor_at is None:
            size = self.core.catch_up().view_after_batch
            if self.ceiling_at is None and size <= self.core.budget.ceiling:
                self.ceiling_at = self.requests
            if size <= self.core.budget.floor:
                self.floor_at = self.requests
        await self.app(scope, receive, send)


@dataclass(frozen=True)
class Result:
    messages: int
    start_view: int
    seconds: float
    calls: int
    prompt_tokens: int
    cost: float
    largest: int
    over_window: int
    ceiling_at: int | None
    floor_at: int | None
    end_view: int
    end_shrinking: bool

    def line(self) -> str:
        def when(calls: int | None) -> str:
            return "never" if calls is None else f"after {calls:,}"

        state = "shrinking" if self.end_shrinking else "steady"
        return (
            f"catch-up of {self.messages:,} messages with no summaries (view "
            f"{self.start_view:,} B): {self.seconds:.1f} s, {self.calls:,} calls, "
            f"{self.prompt_tokens:,} prompt tokens, ${self.cost:,.2f}; largest request "
            f"{self.largest:,} tokens, "
            f"{self.over_window:,} over {WINDOW:,}; view at its ceiling {when(self.ceiling_at)} "
            f"calls, at its floor {when(self.floor_at)}; at the end {self.end_view:,} B, {state}"
        )


def run(messages: int = 3_000, seed: int = 11) -> Result:
    folder = Path(tempfile.mkdtemp(prefix="evertalk-bench-", dir=_tmp()))
    try:
        return anyio.run(_run, folder, messages, seed)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


async def _run(home: Path, messages: int, seed: int) -> Result:
    rng = random.Random(seed)
    fake = AnthropicFake(compaction_reply, ping=False)
    with Chat.open(home / "chat") as chat:
        for _ in range(messages):
            chat.append(*message(rng))
        start_view = chat.core.view.size
        watch = Watch(fake, chat.core)
        inner = AnthropicProvider("sk-ant-bench", IN_PROCESS_URL, http_client=async_client(watch))
        provider = GatedProvider(inner, PrefixGate(), prefix_keys)
        settings = CompactorSettings(model=MEMORY_MODEL, effort=None)
        compactor = Compactor(chat, provider, settings, system=system_text(""), tools=TOOLS)
        started = time.monotonic()
        await compactor.run(until_built=True)
        chat.resume_batch()  # as `memory compact` does once everything is built
        seconds = time.monotonic() - started
        await provider.aclose()
        end_view, end_shrinking = chat.core.view.size, chat.core.view.shrinking
    prompts = [r.input_tokens + r.cache_read + r.cache_write for r in fake.records]
    return Result(
        messages=messages,
        start_view=start_view,
        seconds=seconds,
        calls=len(fake.records),
        prompt_tokens=sum(prompts),
        cost=sum(price(record) for record in fake.records),
        largest=max(prompts, default=0),
        over_window=sum(1 for tokens in prompts if tokens > WINDOW),
        ceiling_at=watch.ceiling_at,
        floor_at=watch.floor_at,
        end_view=end_view,
        end_shrinking=end_shrinking,
    )


def price(record: RequestRecord) -> float:
    """What the call would cost at the compaction model's rates, cache reads and writes priced
    as such."""
    usage = Usage(record.input_tokens, record.output_tokens, record.cache_read, record.cache_write)
    return cost("anthropic", MEMORY_MODEL, usage) or 0.0


def _tmp() -> str | None:
    shm = Path("/dev/shm")
    return str(shm) if shm.is_dir() else None


def main() -> int:
    print(run(int(sys.argv[1]) if len(sys.argv) > 1 else 3_000).line())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
