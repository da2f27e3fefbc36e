"""`evertalk import` of a 2,000-message source, through real command lines and the service.

`python -m bench.import_bench [MESSAGES]` (default 2,000: the tree of 10,000 takes its fake
about six minutes of compaction calls on a 2-core machine).

1. Appending: the messages of one JSON Lines file (our own format, a mix of short and long
   texts) imported into a new chat whose compactions never come back, so that the figure is the
   append path alone: messages per second from the command's start to its end (the preview, the
   reading and the service's start included).
2. The estimate: the same file into another new chat against a fake that answers every
   compaction at once with a 400-byte line (real summaries run 300 to 500 bytes: two of them
   make a merge that needs a call); `memory compact` then waits for the whole tree. The
   compaction calls the preview announced beside the calls the fake received.
"""

from __future__ import annotations

import json
import random
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bench.headless_drain import _configure, is_compaction, is_compaction_body, prose
from bench.service_bench import _evertalk

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))  # for the fakes

from fakes import AnthropicFake, Reply, Script, Text, serve, slow, summarizer

NEVER = 3600.0
ANNOUNCED = re.compile(r"about ([\d,]+) compaction calls")


@dataclass(frozen=True)
class Result:
    messages: int
    append_s: float
    announced: int
    made: int
    compact_s: float

    def lines(self) -> list[str]:
        return [
            f"import of {self.messages:,} messages (JSON Lines), compactions held back: "
            f"{self.append_s:.1f} s = {self.messages / self.append_s:,.0f} messages/s appended",
            f"import estimate: {self.announced:,} compaction calls announced, {self.made:,} made "
            f"against the fake ({self.made / max(self.announced, 1):.0%}); the tree was complete "
            f"{self.compact_s:.0f} s after the import",
        ]


def source(path: Path, count: int) -> Path:
    rng = random.Random(31)
    start = datetime(2025, 1, 6, 9, 0, tzinfo=UTC)
    with path.open("w") as file:
        for n in range(count):
            role = "user" if n % 2 == 0 else "assistant"
            words = rng.choice((6, 30, 120, 400))
            when = (start + timedelta(minutes=3 * n)).isoformat()
            line = {"role": role, "text": prose(rng, words), "time": when, "id": n}
            file.write(json.dumps(line) + "\n")
    return path


def _import(home: Path, path: Path) -> tuple[float, subprocess.CompletedProcess[str]]:
    began = time.perf_counter()
    done = _evertalk(home, "import", str(path), "--yes")
    if done.returncode != 0:
        raise RuntimeError(f"import failed: {done.stderr.strip()}")
    return time.perf_counter() - began, done


def run(count: int = 2_000) -> Result:
    folder = Path(tempfile.mkdtemp(prefix="evertalk-import-bench-"))
    try:
        path = source(folder / "history.jsonl", count)
        held = Script(lambda call: Reply(pieces=(Text("ok"),)))
        held.route(is_compaction, slow(NEVER, summarizer(200)))
        home = folder / "held"
        with serve(AnthropicFake(held, ping=False).app) as url:
            _configure(home, url)
            _with_deadline(home, 1)  # the stop below need not wait for the held calls
            append_s, _ = _import(home, path)
            _evertalk(home, "service", "stop")
        fast = AnthropicFake(
            Script(lambda call: Reply(pieces=(Text("ok"),))).route(is_compaction, summarizer(400)),
            ping=False,
        )
        home = folder / "fast"
        with serve(fast.app) as url:
            _configure(home, url)
            _, done = _import(home, path)
            found = ANNOUNCED.search(done.stdout)
            announced = int(found.group(1).replace(",", "")) if found else 0
            began = time.perf_counter()
            compact = _evertalk(home, "memory", "compact")
            compact_s = time.perf_counter() - began
            if compact.returncode != 0:
                raise RuntimeError(f"memory compact failed: {compact.stderr.strip()}")
            _evertalk(home, "service", "stop")
        made = sum(1 for r in fast.records if r.body is not None and is_compaction_body(r.body))
    finally:
        for name in ("held", "fast"):
            if (folder / name).exists():
                _evertalk(folder / name, "service", "stop")
        shutil.rmtree(folder, ignore_errors=True)
    return Result(count, append_s, announced, made, compact_s)


def _with_deadline(home: Path, seconds: int) -> None:
    config = home / "config.toml"
    config.write_text(config.read_text().replace("[memory]\n", f"[memory]\ndeadline = {seconds}\n"))


def main() -> int:
    for line in run(int(sys.argv[1]) if len(sys.argv) > 1 else 2_000).lines():
        print(line)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
