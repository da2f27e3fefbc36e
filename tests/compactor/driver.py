"""A process that does what a running evertalk does to the memory, for the kill -9 test: it
appends messages (keyed, so a message re-sent after a restart is not logged twice) while the
compactor builds nodes against the fake on loopback, then waits until every node is built.

`python driver.py HOME URL LAST`: appends messages chat.t … LAST-1, printing `ack K` once
message K is on disk, then `done` when nothing is left to build.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import anyio

from evertalk.chat import Chat
from evertalk.compactor.service import Compactor, CompactorSettings
from evertalk.prompts import TOOLS, system_text
from evertalk.providers.anthropic import AnthropicProvider
from evertalk.providers.gate import GatedProvider, PrefixGate
from evertalk.providers.layout import prefix_keys

KEY = "sk-ant-api03-driver-SECRET-5d1e"
MODEL = "claude-haiku-4-5"
SIZES = (40, 300, 600, 1_500, 4_000)
WORDS = ("backup", "rsync", "cron", "nightly", "notes", "naïve", "café", "日本語", "straße")


def message(k: int) -> tuple[str, str]:
    """Message k, the same in every process: (kind, text)."""
    rng = random.Random(k)
    words = [f"m{k}"]
    size = rng.choice(SIZES)
    while len(" ".join(words).encode()) < size:
        words.append(rng.choice(WORDS))
    return rng.choice(("user", "ever", "echo")), " ".join(words)


async def run(home: Path, url: str, last: int) -> None:
    chat = Chat.open(home / "chat")
    provider = GatedProvider(AnthropicProvider(KEY, url), PrefixGate(), prefix_keys)
    settings = CompactorSettings(model=MODEL, effort=None)
    compactor = Compactor(chat, provider, settings, system=system_text(""), tools=TOOLS)
    async with anyio.create_task_group() as group:
        group.start_soon(compactor.run)
        for k in range(chat.t, last):
            kind, text = message(k)
            chat.append(kind, text, key=f"m{k}")
            compactor.message_logged()
            print(f"ack {k}", flush=True)
            await anyio.sleep(0.01)
        while compactor.unbuilt() or compactor.in_flight:
            await anyio.sleep(0.02)
        print("done", flush=True)
        group.cancel_scope.cancel()
    await provider.aclose()
    chat.close()


if __name__ == "__main__":
    anyio.run(run, Path(sys.argv[1]), sys.argv[2], int(sys.argv[3]))
