"""`evertalk -p` streaming: the time to the reply's first byte on standard output against the
time of the whole turn.

`python -m bench.first_byte [RUNS]` (default 5). Each run is `evertalk -p` as a user runs it, a
subprocess, against the Anthropic fake on loopback, which streams a 2,400-character reply in
24-character pieces 20 ms apart (about 2 s of streaming, as a model writes). The first run
starts the service (cold); the others find it running (warm). The figures: the median time from
the command's start to its first byte of output, and to its exit.
"""

from __future__ import annotations

import os
import selectors
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))  # for the fakes

from fakes import AnthropicFake, Call, Script, reply, serve, summarizer

REPLY = "Streaming words arrive a piece at a time. " * 57  # about 2,400 characters
PACE = 0.02  # seconds between two pieces of the reply
API_KEY = "sk-ant-bench-0123456789"


@dataclass(frozen=True)
class Result:
    cold: tuple[float, float]  # (first byte, whole turn) in seconds
    warm: list[tuple[float, float]]

    def line(self) -> str:
        first = statistics.median(run[0] for run in self.warm)
        whole = statistics.median(run[1] for run in self.warm)
        return (
            f"-p streaming: first byte {first * 1e3:.0f} ms, whole turn {whole:.2f} s "
            f"(median of {len(self.warm)} with the service running; a {len(REPLY):,}-character "
            f"reply streamed over about {len(REPLY) / 24 * PACE:.1f} s); the first run, which "
            f"starts the service: {self.cold[0]:.2f} s to the first byte, {self.cold[1]:.2f} s "
            "in all"
        )


def _is_compaction(call: Call) -> bool:
    return call.body.get("tool_choice") == {"type": "none"}


def _timed(home: Path, work: Path) -> tuple[float, float]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("EVERTALK_", "ANTHROPIC_"))}
    env["EVERTALK_HOME"] = str(home)
    started = time.perf_counter()
    process = subprocess.Popen(
        [sys.executable, "-m", "evertalk", "-p", "tell me a long story"],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=env,
        cwd=work,
    )
    assert process.stdout is not None
    first: float | None = None
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        while True:
            selector.select()
            chunk = os.read(process.stdout.fileno(), 65536)
            if not chunk:
                break
            if first is None:
                first = time.perf_counter() - started
    process.wait()
    whole = time.perf_counter() - started
    return (first if first is not None else whole), whole


def run(runs: int = 5) -> Result:
    turns = reply(REPLY, chunk_delay=PACE)  # every turn's reply
    fake = AnthropicFake(Script(turns).route(_is_compaction, summarizer(100)))
    with tempfile.TemporaryDirectory() as folder, serve(fake.app) as url:
        home, work = Path(folder) / "home", Path(folder) / "work"
        home.mkdir(mode=0o700)
        work.mkdir()
        (home / "config.toml").write_text(
            f'provider = "anthropic"\nbase_url = "{url}"\napi_key = "{API_KEY}"\n'
        )
        (home / "config.toml").chmod(0o600)
        try:
            cold = _timed(home, work)
            warm = [_timed(home, work) for _ in range(runs)]
        finally:
            subprocess.run(
                [sys.executable, "-m", "evertalk", "--home", str(home), "service", "stop"],
                capture_output=True,
                timeout=60,
            )
    return Result(cold, warm)


if __name__ == "__main__":
    print(run(int(sys.argv[1]) if len(sys.argv) > 1 else 5).line())
