"""Speeds that tests once asserted with a stopwatch, and so passed or failed by the machine's load.
The tests now check what happens; the figures are here, each beside its target.

`python -m bench.edge_timings`

- redaction: `redact` of a clean 30,000-character text (the usual tool result) with three keys,
  once its patterns are built: median per call over 100 calls (target under 2 ms; it runs on
  every log write and every tool result).
- capture hook: `evertalk capture` fired as Claude Code fires it, against a service on the
  Anthropic fake, wall time of each of five hooks beside `python -c pass` (target under 2 s,
  about a tenth of that here: the hook hands the work to a worker and returns).
- eight compactions at once: through the prefix gate, once the shared prefix is written, each
  response starting 1 s late: the wall time (target under 3 s; one after another: 8 s).
"""

from __future__ import annotations

import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import anyio

from bench.headless_drain import _configure, is_compaction
from bench.service_bench import _environment, _evertalk, _wall
from evertalk.providers.anthropic import AnthropicProvider
from evertalk.providers.base import Request, collect
from evertalk.providers.gate import GatedProvider, PrefixGate
from evertalk.providers.layout import compaction_request, prefix_keys
from evertalk.redaction import redact

TESTS = Path(__file__).resolve().parent.parent / "tests"
sys.path.insert(0, str(TESTS))  # for the fakes

from fakes import (  # noqa: E402
    IN_PROCESS_URL,
    AnthropicFake,
    InFlight,
    Script,
    async_client,
    chat,
    serve,
    slow,
    summarizer,
)

KEY = "sk-ant-api03-Zx9_Qw-7Hq2LmN0pRsTuVwXyZ+ab/cdEf12345"
HOOKS = 5
DELAY = 1.0
SESSION = "5c1e2f0a-8d3b-4c61-9f0e-2b7d4a9c1e35"
PROJECT = "-home-ada-src-shop"
FIXTURE = TESTS / "importers/fixtures/claude-code/projects" / PROJECT / f"{SESSION}.jsonl"


@dataclass(frozen=True)
class Result:
    redact_ms: float
    hook_s: list[float]
    python_s: float
    parallel_s: float

    def lines(self) -> list[str]:
        hooks = ", ".join(f"{t:.3f}" for t in self.hook_s)
        return [
            f"redaction of a clean 30,000-character text: median {self.redact_ms:.3f} ms a call "
            "(target under 2 ms)",
            f"capture hook wall time: {hooks} s (target under 2 s); floor (`python -c pass`): "
            f"{self.python_s:.3f} s",
            f"eight compactions at once, each answered {DELAY:.0f} s late: {self.parallel_s:.2f} s "
            f"(target under {3 * DELAY:.0f} s; one after another: {8 * DELAY:.0f} s)",
        ]


def redaction_ms() -> float:
    keys = [KEY, KEY[::-1] + "more", "sk-or-v1-" + "a1b2c3d4" * 9]
    text = "ordinary output, line after line, with paths /usr/lib and numbers 12345\n" * 400
    redact(text, keys)  # builds the patterns
    times = []
    for _ in range(100):
        began = time.perf_counter()
        redact(text, keys)
        times.append(time.perf_counter() - began)
    return statistics.median(times) * 1e3


def _payload(event: str, path: Path) -> str:
    return json.dumps(
        {
            "session_id": SESSION,
            "transcript_path": str(path),
            "cwd": "/home/ada/src/shop",
            "permission_mode": "default",
            "hook_event_name": event,
        }
    )


def hook_times() -> tuple[list[float], float]:
    """Wall times of HOOKS hooks on one growing session, and of `python -c pass`."""
    fake = AnthropicFake(Script(chat("Noted.")).route(is_compaction, summarizer(200)), ping=False)
    folder = Path(tempfile.mkdtemp(prefix="evertalk-hook-bench-"))
    home = folder / "home"
    session = folder / "claude" / "projects" / PROJECT / f"{SESSION}.jsonl"
    session.parent.mkdir(parents=True)
    lines = FIXTURE.read_bytes().splitlines(keepends=True)
    try:
        with serve(fake.app) as url:
            _configure(home, url)
            env = _environment(home)
            hooks, python = [], []
            for k in range(HOOKS):
                session.write_bytes(b"".join(lines[: len(lines) * (k + 1) // HOOKS]))
                began = time.perf_counter()
                subprocess.run(
                    [sys.executable, "-m", "evertalk", "capture"],
                    input=_payload("Stop", session),
                    capture_output=True,
                    text=True,
                    env=env,
                    cwd=folder,
                    timeout=60,
                )
                hooks.append(time.perf_counter() - began)
                python.append(_wall([sys.executable, "-c", "pass"], env))
            _evertalk(home, "service", "stop")
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return hooks, statistics.median(python)


def _compaction(n: int) -> Request:
    system = "You are Ever, and this is the system prompt the compactions share. " * 80
    context = "\n".join(["<chat>", *(f"{k}+1|line {k} of chat {n}" for k in range(12)), "</chat>"])
    return compaction_request("claude-haiku-4-5", system, [], context, f"task {n}", [], 1_000)


async def _parallel() -> float:
    fake = AnthropicFake(slow(DELAY, chat("a line")), ping=False)
    inner = AnthropicProvider("bench-key", IN_PROCESS_URL, http_client=async_client(InFlight(fake)))
    provider = GatedProvider(inner, PrefixGate(), prefix_keys)
    try:
        await collect(provider, _compaction(0))  # writes the shared prefix's entry
        began = time.perf_counter()
        async with anyio.create_task_group() as group:
            for n in range(1, 9):
                group.start_soon(collect, provider, _compaction(n))
        return time.perf_counter() - began
    finally:
        await provider.aclose()


def run() -> Result:
    hooks, python = hook_times()
    return Result(redaction_ms(), hooks, python, anyio.run(_parallel))


def main() -> int:
    for line in run().lines():
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
