"""The compactor's parallelism: how long a backlog takes when each response starts 1 s late.

`python -m bench.compaction_parallel [MESSAGES] [DELAY]` (default 30 messages, 1.0 s).

A fresh chat of MESSAGES long messages (none is free) is compacted from nothing by the real
`Compactor`, through the real `AnthropicProvider` behind one `PrefixGate`, against the in-process
`AnthropicFake`, whose every response starts DELAY seconds after its request arrives. 30 messages
make 56 calls: 30 leaves and 26 merges (a 300-byte line never makes a free parent). The figures:
the wall time, the most requests inside the fake at once, and how many calls wrote the cache
entry of the system prompt (the gate's job is that one does, not eight).

The prefix gate once made every call wait for the previous call's response, even on the system
prompt already in the cache: 56 calls then took about 56 delays. SPEC §4.6 lets a written prefix
gate nothing, so the 8 parallel calls of §4.1 are limited only by the tree's own order.
"""

from __future__ import annotations

import random
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import anyio

from evertalk.chat import Chat
from evertalk.compactor.service import Compactor, CompactorSettings
from evertalk.prompts import TOOLS, system_text
from evertalk.providers.anthropic import AnthropicProvider
from evertalk.providers.gate import GatedProvider, PrefixGate
from evertalk.providers.layout import prefix_keys

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))  # for the fakes

from fakes import IN_PROCESS_URL, AnthropicFake, InFlight, async_client, slow, summarizer

MODEL = "claude-haiku-4-5"
WORDS = ("backup", "rsync", "cron", "nightly", "notes", "log", "rotate", "disk", "quota", "deploy")


@dataclass(frozen=True)
class Result:
    messages: int
    delay: float
    calls: int
    seconds: float
    peak: int
    system_writes: int

    def line(self) -> str:
        return (
            f"compaction parallelism: {self.calls} calls with a {self.delay:g} s response delay "
            f"in {self.seconds:.1f} s, at most {self.peak} in flight; the system prompt "
            f"written by {self.system_writes} call(s)"
        )


def run(messages: int = 30, delay: float = 1.0) -> Result:
    folder = Path(tempfile.mkdtemp(prefix="evertalk-bench-", dir=_tmp()))
    try:
        return anyio.run(_run, folder, messages, delay)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


async def _run(home: Path, messages: int, delay: float) -> Result:
    rng = random.Random(56)
    fake = AnthropicFake(slow(delay, summarizer(300)), ping=False)
    counter = InFlight(fake)
    inner = AnthropicProvider("sk-ant-bench", IN_PROCESS_URL, http_client=async_client(counter))
    provider = GatedProvider(inner, PrefixGate(), prefix_keys)
    with Chat.open(home / "chat") as chat:
        for k in range(messages):
            chat.append("user", f"m{k} " + " ".join(rng.choice(WORDS) for _ in range(200)))
        settings = CompactorSettings(model=MODEL, effort=None)
        compactor = Compactor(chat, provider, settings, system=system_text(""), tools=TOOLS)
        started = time.monotonic()
        await compactor.run(until_built=True)
        seconds = time.monotonic() - started
    await provider.aclose()
    # a call that read nothing from the cache wrote (at least) the system prompt's entry
    writers = sum(1 for record in fake.records if record.cache_read == 0)
    return Result(messages, delay, len(fake.records), seconds, counter.peak, writers)


def _tmp() -> str | None:
    shm = Path("/dev/shm")
    return str(shm) if shm.is_dir() else None


def main() -> int:
    messages = int(sys.argv[1]) if len(sys.argv) > 1 else 30
    delay = float(sys.argv[2]) if len(sys.argv) > 2 else 1.0
    print(run(messages, delay).line())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
