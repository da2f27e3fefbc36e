"""`evertalk memory status` of an indexed chat, as a person runs it: the time its imports take
(summed from `python -X importtime`, the interpreter's own start left out) and the whole
command's wall time, in RUNS fresh processes: the median, and the best (a shared machine's
load only ever adds). Targets: 60 ms of imports, 0.25 s for the command at a million messages.
The modules are compiled once, beforehand, as an installed evertalk's are.

`python -m bench.status_bench CHAT_DIR` runs it alone on a chat folder (`make bench` passes
the generated one, indexed by its open probes).
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

CACHE = Path(__file__).with_name("out") / "pycache"
RUNS = 7
IMPORTS_TARGET_MS = 60.0
COMMAND_TARGET_S = 0.25
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


def main() -> int:
    print(run(Path(sys.argv[1])).line())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
