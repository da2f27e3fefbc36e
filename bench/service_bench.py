"""The service's figures: `-p` on a warm service, and 100 `-p` turns with the compactor at work.

`python -m bench.service_bench [RUNS]` (default 100).

1. `evertalk -p hi` wall time against a service already running (its turn answered at once by
   the Anthropic fake on loopback, short enough that no summary is waited for), median of 15
   runs, beside `python -c pass` in the same run.
2. RUNS one-turn `evertalk -p` runs, each message and reply long enough that its leaf needs a
   model call, every compaction answered 0.3 s late: the compaction calls the fake received,
   those the ledger recorded (the difference: calls abandoned), any that the fake saw cut off,
   and the seconds from the last `-p`'s exit until the tree has no node left to build.
Each figure runs real command lines (`python -m evertalk`), as a user would.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from bench.headless_drain import _configure, is_compaction, is_compaction_body, prose
from evertalk.ledger import ledger_path, read_records

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))  # for the fakes

from fakes import AnthropicFake, Reply, Script, Text, serve, slow, summarizer

WARM_RUNS = 15


@dataclass(frozen=True)
class Result:
    p_median_s: float
    p_range: tuple[float, float]
    python_median_s: float
    runs: int
    failed_runs: int
    sent: int
    recorded: int
    cut_off: int
    drain_s: float

    def lines(self) -> list[str]:
        low, high = self.p_range
        return [
            f"-p on a warm service: median {self.p_median_s:.3f} s wall over {WARM_RUNS} runs "
            f"(range {low:.3f}-{high:.3f}; target 0.3 s); floor (`python -c pass`): "
            f"{self.python_median_s:.3f} s",
            f"{self.runs} -p turns through the service, compactions answered 0.3 s late: "
            f"{self.sent} compaction calls sent, {self.recorded} recorded, "
            f"{self.sent - self.recorded} abandoned, {self.cut_off} cut off; {self.failed_runs} "
            f"runs failed; tree complete {self.drain_s:.1f} s after the last -p exited",
        ]


def _environment(home: Path) -> dict[str, str]:
    """The home, and compiled modules cached as a user's install has them (out of the tree)."""
    skip = ("EVERTALK_", "PYTHONDONTWRITEBYTECODE")
    env = {k: v for k, v in os.environ.items() if not k.startswith(skip)}
    env["EVERTALK_HOME"] = str(home)
    env["PYTHONPYCACHEPREFIX"] = str(home.parent / "pycache")
    return env


def _evertalk(home: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = _environment(home)
    return subprocess.run(
        [sys.executable, "-m", "evertalk", *args],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=env,
        cwd=home.parent,
        timeout=300,
    )


def _wall(command: list[str], env: dict[str, str] | None = None) -> float:
    began = time.perf_counter()
    subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, env=env, check=False)
    return time.perf_counter() - began


def _unbuilt(home: Path) -> int:
    status = _evertalk(home, "memory", "status", "--json")
    found = json.loads(status.stdout)
    return int(found.get("unbuilt", 0))


def warm_p() -> tuple[list[float], list[float]]:
    """Wall times of `-p hi` on a warm service (short replies: each leaf is free, so no turn
    waits for a summary), and of `python -c pass`, interleaved."""
    fake = AnthropicFake(Script(lambda call: Reply(pieces=(Text("Hello."),))), ping=False)
    folder = Path(tempfile.mkdtemp(prefix="evertalk-service-warm-"))
    home = folder / "home"
    try:
        with serve(fake.app) as url:
            _configure(home, url)
            env = _environment(home)
            _evertalk(home, "-p", "the first message starts the service")
            warm, python = [], []
            for _ in range(WARM_RUNS):
                warm.append(_wall([sys.executable, "-m", "evertalk", "-p", "hi"], env))
                python.append(_wall([sys.executable, "-c", "pass"], env))
    finally:
        _evertalk(home, "service", "stop")
        shutil.rmtree(folder, ignore_errors=True)
    return warm, python


def run(runs: int = 100) -> Result:
    warm, python = warm_p()
    rng = random.Random(12)
    replies = Script(lambda call: Reply(pieces=(Text("Noted: " + prose(rng, 150)),)))
    replies.route(is_compaction, slow(0.3, summarizer(200)))
    fake = AnthropicFake(replies, ping=False)
    folder = Path(tempfile.mkdtemp(prefix="evertalk-service-bench-"))
    home = folder / "home"
    try:
        with serve(fake.app) as url:
            _configure(home, url)
            failed = 0
            for k in range(runs):
                failed += _evertalk(home, "-p", f"note {k}: " + prose(rng, 150)).returncode != 0
            ended = time.monotonic()
            while _unbuilt(home) and time.monotonic() - ended < 600:
                time.sleep(0.2)
            drain = time.monotonic() - ended
            _evertalk(home, "service", "stop")
        compactions = [r for r in fake.records if r.body is not None and is_compaction_body(r.body)]
        recorded = sum(
            1 for record in read_records(ledger_path(home)).records if record.role == "compaction"
        )
    finally:
        _evertalk(home, "service", "stop")
        shutil.rmtree(folder, ignore_errors=True)
    return Result(
        p_median_s=statistics.median(warm),
        p_range=(min(warm), max(warm)),
        python_median_s=statistics.median(python),
        runs=runs,
        failed_runs=failed,
        sent=len(compactions),
        recorded=recorded,
        cut_off=sum(1 for r in compactions if r.interrupted or not r.finished),
        drain_s=drain,
    )


def main() -> int:
    for line in run(int(sys.argv[1]) if len(sys.argv) > 1 else 100).lines():
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
