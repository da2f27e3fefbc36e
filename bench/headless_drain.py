"""Compaction calls `evertalk -p` abandons: run many one-turn `-p` runs, count the calls lost.

`python -m bench.headless_drain [RUNS] [DELAY]` (default 100 runs, 1.0 s).

Each run is `run_via_service` (what `evertalk -p MESSAGE` calls) on one home, from this process,
a client of the home's service (which the first run starts), against the Anthropic fake served
on loopback: the turn's reply comes at once, every compaction's response starts DELAY seconds
late, and both the message and the reply are long (each leaf needs a model call). After the last
run the service is stopped, as `evertalk service stop` does. A compaction call the fake received
but the ledger never recorded was abandoned: paid for (the request went out), its line lost, its
node sent again later. The figure: calls received, calls recorded, the difference, and the time
the runs took.
"""

from __future__ import annotations

import contextlib
import io
import random
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evertalk.client.connection import stop_service
from evertalk.client.headless import run_via_service
from evertalk.ledger import ledger_path, read_records

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))  # for the fakes

from fakes import AnthropicFake, Call, Reply, Script, Text, serve, slow, summarizer

WORDS = ("backup", "rsync", "cron", "nightly", "notes", "log", "rotate", "disk", "quota", "deploy")


@dataclass(frozen=True)
class Result:
    runs: int
    delay: float
    sent: int
    recorded: int
    failed_runs: int
    seconds: float

    def line(self) -> str:
        return (
            f"-p drain: {self.runs} runs, compactions answered {self.delay:g} s late: "
            f"{self.sent} compaction calls sent, {self.recorded} recorded, "
            f"{self.sent - self.recorded} abandoned; {self.failed_runs} runs failed; "
            f"{self.seconds:.0f} s"
        )


def is_compaction_body(body: dict[str, Any]) -> bool:
    return body.get("tool_choice") == {"type": "none"}


def is_compaction(call: Call) -> bool:
    return is_compaction_body(call.body)


def prose(rng: random.Random, words: int) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(words))


def run(runs: int = 100, delay: float = 1.0) -> Result:
    rng = random.Random(100)
    replies = Script(lambda call: Reply(pieces=(Text("Noted: " + prose(rng, 150)),)))
    replies.route(is_compaction, slow(delay, summarizer(200)))
    fake = AnthropicFake(replies, ping=False)
    home = Path(tempfile.mkdtemp(prefix="evertalk-drain-"))
    failed = 0
    try:
        with serve(fake.app) as url:
            _configure(home, url)
            began = time.monotonic()
            for k in range(runs):
                message = f"note {k}: " + prose(rng, 150)
                with (
                    contextlib.redirect_stdout(io.StringIO()),
                    contextlib.redirect_stderr(io.StringIO()),
                ):
                    failed += run_via_service(home, message) != 0
            seconds = time.monotonic() - began
            stop_service(home, "bench")  # waits for the compaction calls in flight
        sent = sum(1 for r in fake.records if r.body is not None and is_compaction_body(r.body))
        ledger = read_records(ledger_path(home)).records
        recorded = sum(1 for record in ledger if record.role == "compaction")
    finally:
        shutil.rmtree(home, ignore_errors=True)
    return Result(runs, delay, sent, recorded, failed, seconds)


def _configure(home: Path, url: str) -> None:
    home.mkdir(parents=True, exist_ok=True)
    config = home / "config.toml"
    config.write_text(
        "\n".join(
            [
                'provider = "anthropic"',
                'model = "claude-sonnet-5-5"',
                'api_key = "sk-ant-bench"',
                f'base_url = "{url}"',
                "",
                "[memory]",
                'model = "claude-haiku-5-5"',
                "settle_timeout = 20",
                "",
            ]
        )
    )
    config.chmod(0o600)


def main() -> int:
    runs = int(sys.argv[1]) if len(sys.argv) > 1 else 100
    delay = float(sys.argv[2]) if len(sys.argv) > 2 else 1.0
    print(run(runs, delay).line())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
