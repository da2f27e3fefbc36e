"""`evertalk -p hi` against a service already running: the command's wall time (median of RUNS,
beside `python -c pass` run in turn with it), and what the client loads: its modules and their
import time (summed from `python -X importtime`, the interpreter's own start left out). The turn
is answered at once by the Anthropic fake on loopback. Target: 100 ms.

`python -m bench.p_client [RUNS]` (default 15) runs it alone.
"""

from __future__ import annotations

import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from bench.headless_drain import _configure
from bench.service_bench import _environment, _evertalk

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))  # for the fakes

from fakes import AnthropicFake, Reply, Script, Text, serve

RUNS = 15
TARGET_MS = 100.0
P_HI = [sys.executable, "-m", "evertalk", "-p", "hi"]


@dataclass(frozen=True)
class PFigures:
    walls: list[float]
    floor: list[float]
    modules: int
    imports_ms: float

    def line(self) -> str:
        wall, floor = statistics.median(self.walls) * 1e3, statistics.median(self.floor) * 1e3
        return (
            f"-p hi on a warm service: {wall:.0f} ms wall, median of {len(self.walls)} (best "
            f"{min(self.walls) * 1e3:.0f}; target {TARGET_MS:.0f} ms); floor (`python -c "
            f"pass`) {floor:.0f} ms; the client loads {self.modules} modules beyond the "
            f"interpreter's, {self.imports_ms:.0f} ms of imports"
        )


def _wall(command: list[str], env: dict[str, str]) -> float:
    began = time.perf_counter()
    subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, env=env, check=True)
    return time.perf_counter() - began


def _imports(command: list[str], env: dict[str, str]) -> tuple[dict[str, int], set[str]]:
    """Microseconds of each top-level import of `command` run under `-X importtime`, and the
    names of every module it imported."""
    done = subprocess.run(
        [command[0], "-X", "importtime", *command[1:]],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        env=env,
        check=True,
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


def run(runs: int = RUNS) -> PFigures:
    fake = AnthropicFake(Script(lambda call: Reply(pieces=(Text("Hello."),))), ping=False)
    folder = Path(tempfile.mkdtemp(prefix="evertalk-p-client-"))
    home = folder / "home"
    try:
        with serve(fake.app) as url:
            _configure(home, url)
            env = _environment(home)
            _evertalk(home, "-p", "the first message starts the service")
            walls, floor = [], []
            for _ in range(runs):
                walls.append(_wall(P_HI, env))
                floor.append(_wall([sys.executable, "-c", "pass"], env))
            _, bare = _imports([sys.executable, "-c", "pass"], env)
            tops, names = _imports(P_HI, env)
    finally:
        _evertalk(home, "service", "stop")
        shutil.rmtree(folder, ignore_errors=True)
    imports = sum(us for name, us in tops.items() if name not in bare) / 1e3
    return PFigures(walls, floor, len(names - bare), imports)


if __name__ == "__main__":
    print(run(int(sys.argv[1]) if len(sys.argv) > 1 else RUNS).line())
