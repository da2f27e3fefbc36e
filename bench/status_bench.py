"""`evertalk memory status` of an indexed chat, as a person runs it: the time its imports take
(summed from `python -X importtime`, the interpreter's own start left out) and the whole
command's wall time, in RUNS fresh processes: the median, and the best (a shared machine's
load only ever adds). Targets: 60 ms of imports, 0.25 s for the command at a million messages.
The modules are compiled once, beforehand, as an installed evertalk's are.

`python -m bench.status_bench CHAT_DIR` runs it alone on a chat folder (`make bench` passes
the generated one, indexed by its open probes). `python -m bench.status_bench` alone compares
two chats laid out by day, as a long-lived one is (PER_DAY messages a day, each day's file last
written on that day): SMALL and LARGE messages, the larger with thousands of day files. The
command's wall time must not grow with them: at most twice the small chat's, and 0.25 s.
"""

from __future__ import annotations

import os
import random
import shutil
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

from bench.chat_gen import WORDS, write_chat

OUT = Path(__file__).with_name("out")
CACHE = OUT / "pycache"
RUNS = 7
IMPORTS_TARGET_MS = 60.0
COMMAND_TARGET_S = 0.25
SMALL, LARGE = 10_000, 1_000_000
PER_DAY = 500
FIRST_DAY = datetime(2020, 1, 1, 12, tzinfo=UTC)
GROWTH_TARGET = 2.0
STATUS = (
    "from evertalk.cli import main; raise SystemExit(main(['memory', 'status', '--home', {!r}]))"
)


@dataclass(frozen=True)
class StatusFigures:
    messages: str
    imports_ms: list[float]
    command_s: list[float]
    startup_ms: float
    modules: int

    def line(self) -> str:
        imports, command = statistics.median(self.imports_ms), statistics.median(self.command_s)
        return (
            f"memory status of an indexed chat ({self.messages} messages; median of {RUNS}, "
            f"best in brackets): imports {imports:.0f} ms ({min(self.imports_ms):.0f}; "
            f"{self.modules} modules; target {IMPORTS_TARGET_MS:.0f} ms), command "
            f"{command:.2f} s wall ({min(self.command_s):.2f}; target {COMMAND_TARGET_S} s); "
            f"floor (the interpreter's start alone): {self.startup_ms:.0f} ms"
        )


def _environment() -> dict[str, str]:
    """Compiled modules cached, as an installed evertalk has them (in a folder of the bench's,
    not beside the sources)."""
    env = {**os.environ, "PYTHONPYCACHEPREFIX": str(CACHE), "PYTHONWARNINGS": "ignore"}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    return env


def _importtime(code: str) -> tuple[dict[str, int], set[str]]:
    """Microseconds of each top-level import of a fresh interpreter that runs `code`, and the
    names of every module it imported."""
    done = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env=_environment(),
    )
    tops: dict[str, int] = {}
    names = set()
    for row in done.stderr.splitlines():
        if not row.startswith("import time:") or "imported package" in row:
            continue
        _, cumulative, name = row.removeprefix("import time:").split("|")
        names.add(name.strip())
        if not name.startswith("  "):  # nested imports are inside their parent's figure
            tops[name.strip()] = int(cumulative)
    return tops, names


def _wall(code: str) -> float:
    begin = time.perf_counter()
    subprocess.run(
        [sys.executable, "-c", code], capture_output=True, check=True, env=_environment()
    )
    return time.perf_counter() - begin


def _messages(home: Path, code: str) -> str:
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=_environment()
    )
    for row in done.stdout.splitlines():
        if row.startswith("messages"):
            return row.split()[1].rstrip(",")
    raise RuntimeError(f"memory status of {home} failed: {done.stderr.strip()}")


def run(chat_dir: Path) -> StatusFigures:
    home = chat_dir.parent
    code = STATUS.format(str(home))
    messages = _messages(home, code)  # the index whole and the modules compiled before the runs
    _, startup = _importtime("pass")
    imports, walls, modules = [], [], 0
    for _ in range(RUNS):
        tops, names = _importtime(code)
        imports.append(sum(us for name, us in tops.items() if name not in startup) / 1e3)
        modules = len(names - startup)
        walls.append(_wall(code))
    floor = statistics.median(_wall("pass") for _ in range(RUNS))
    return StatusFigures(messages, imports, walls, floor * 1e3, modules)


@dataclass(frozen=True)
class ScalingFigures:
    small: tuple[int, int, list[float]]
    """Messages, day files and the command's wall times (s) of the small chat."""
    large: tuple[int, int, list[float]]

    def line(self) -> str:
        (count, files, walls), (big, big_files, big_walls) = self.small, self.large
        small, large = statistics.median(walls), statistics.median(big_walls)
        return (
            f"memory status by day files (median of {RUNS}): {count:,} messages in {files:,} "
            f"day files {small:.2f} s, {big:,} in {big_files:,} {large:.2f} s = "
            f"{large / small:.1f}x (targets {GROWTH_TARGET:.0f}x and {COMMAND_TARGET_S} s)"
        )


def scaling() -> ScalingFigures:
    """`memory status` of a SMALL and a LARGE chat laid out by day."""
    figures = []
    for count in (SMALL, LARGE):
        home = _by_day(count)
        code = STATUS.format(str(home))
        _messages(home, code)
        walls = [_wall(code) for _ in range(RUNS)]
        files = sum(1 for folder in ("main", "tree") for _ in (home / "chat" / folder).iterdir())
        figures.append((count, files, walls))
    return ScalingFigures(figures[0], figures[1])


def _by_day(count: int) -> Path:
    """A home whose chat has `count` messages, PER_DAY a day, built and indexed once: each day
    file's time is its day's, and the owner's checkpoint came after."""
    home = OUT / f"status-{count}"
    if (home / "ready").exists():
        return home
    shutil.rmtree(home, ignore_errors=True)
    chat_dir = home / "chat"
    write_chat(
        chat_dir,
        count,
        rng=random.Random(7),
        words=WORDS,
        day_of=lambda t: f"{FIRST_DAY + timedelta(days=t // PER_DAY):%Y-%m-%d}",
        tree_day=lambda day: day,
        summary_words=lambda rng: 30,
    )
    for folder in ("main", "tree"):
        for path in (chat_dir / folder).iterdir():
            at = int(datetime.fromisoformat(path.stem + "T12:00:00+00:00").timestamp()) * 10**9
            os.utime(path, ns=(at, at))
    from evertalk.store import ChatStore  # after the files: the index is built from them

    with ChatStore.open(chat_dir) as store:
        store.checkpoint()
    (home / "ready").touch()
    return home


def main() -> int:
    if len(sys.argv) > 1:
        print(run(Path(sys.argv[1])).line())
    else:
        print(scaling().line())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
