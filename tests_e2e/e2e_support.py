"""Helpers of the end-to-end tests: a fresh evertalk home for the local server, running the real
`evertalk` command in it, and reading what it left behind (the usage ledger, the tree files).

The tests never import evertalk: they drive the installed command, as a user would, and read
only what the README and the design (SPEC §1.1, §1.8, §2.2) say is on disk.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

WINDOW = int(os.environ.get("E2E_N_CTX", "8192"))
"""The server's context size (`--n_ctx`, which the runner passes on) and the window evertalk
is told about, for turns and for the compactor alike: SmolLM2-135M was trained for 8,192."""

# Variables that would point evertalk elsewhere than the fresh home and the local server.
_CLEARED = (
    "EVERTALK_HOME",
    "EVERTALK_PROVIDER",
    "EVERTALK_MODEL",
    "EVERTALK_MEMORY_MODEL",
    "EVERTALK_WORKDIR",
    "OPENAI_API_KEY",
    "OPENAI_BASE_URL",
    "ANTHROPIC_API_KEY",
    "ANTHROPIC_BASE_URL",
    "ANTHROPIC_AUTH_TOKEN",
    "OPENROUTER_API_KEY",
)


@dataclass(frozen=True)
class Server:
    """The llama-cpp-python server the runner started: its base URL (ending in /v1) and the
    model name it serves."""

    base_url: str
    model: str
    log: Path | None


def write_config(
    home: Path,
    base_url: str,
    model: str,
    *,
    concurrency: int | None = None,
    catch_up_timeout: float | None = None,
    workdir: Path | None = None,
) -> Path:
    """A `config.toml` for `provider = "llamacpp"`, as README's "Models" section shows it: the
    provider, the model the server serves, its address, and both windows set to the server's
    context size. `concurrency` and `catch_up_timeout` None leave evertalk's defaults."""
    home.mkdir(mode=0o700, parents=True, exist_ok=True)
    lines = [
        'provider = "llamacpp"',
        f"model = {json.dumps(model)}",
        f"base_url = {json.dumps(base_url)}",
    ]
    if workdir is not None:
        lines.append(f"workdir = {json.dumps(str(workdir))}")
    lines += ["", "[memory]", f"context_window = {WINDOW}"]
    if concurrency is not None:
        lines.append(f"concurrency = {concurrency}")
    if catch_up_timeout is not None:
        lines.append(f"catch_up_timeout = {catch_up_timeout}")
    lines += ["", "[turn]", f"context_window = {WINDOW}", ""]
    path = home / "config.toml"
    path.write_text("\n".join(lines), encoding="utf-8")
    path.chmod(0o600)
    return path


@dataclass(frozen=True)
class Run:
    """One `evertalk` command as it ended."""

    args: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    seconds: float
    timed_out: bool = False

    def describe(self) -> str:
        """For a failed assertion: the command, how it ended, and the end of its output."""
        how = "timed out" if self.timed_out else f"exit {self.returncode}"
        return (
            f"evertalk {' '.join(self.args)}: {how} after {self.seconds:.1f} s\n"
            f"--- stdout (end) ---\n{self.stdout[-3000:]}\n"
            f"--- stderr (end) ---\n{self.stderr[-3000:]}"
        )


def evertalk_command() -> str:
    """The `evertalk` beside the Python that runs the tests (the e2e virtualenv's), else the one
    on PATH."""
    beside = Path(sys.executable).parent / "evertalk"
    if beside.is_file():
        return str(beside)
    found = shutil.which("evertalk")
    if found is None:
        raise RuntimeError("no evertalk command: install evertalk in this environment")
    return found


def run_evertalk(
    home: Path,
    *args: str,
    timeout: float,
    cwd: Path | None = None,
    stdin: str | None = None,
    interrupt_grace: float = 60.0,
) -> Run:
    """Run `evertalk ARGS` with EVERTALK_HOME=home. At `timeout` it gets SIGINT (Ctrl+C: evertalk
    keeps what it built and says so), then, `interrupt_grace` seconds later, SIGKILL."""
    env = {k: v for k, v in os.environ.items() if k not in _CLEARED}
    env["EVERTALK_HOME"] = str(home)
    env["NO_COLOR"] = "1"
    started = time.monotonic()
    process = subprocess.Popen(
        [evertalk_command(), *args],
        cwd=cwd or home,
        env=env,
        stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        encoding="utf-8",
        errors="replace",
    )
    timed_out = False
    try:
        out, err = process.communicate(stdin, timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        process.send_signal(signal.SIGINT)
        try:
            out, err = process.communicate(timeout=interrupt_grace)
        except subprocess.TimeoutExpired:
            process.kill()
            out, err = process.communicate()
    return Run(
        args=args,
        returncode=process.returncode,
        stdout=out,
        stderr=err,
        seconds=time.monotonic() - started,
        timed_out=timed_out,
    )


def json_lines(text: str) -> list[dict[str, Any]]:
    """Every line of `text` parsed as a JSON object; a line that is not one raises ValueError."""
    events: list[dict[str, Any]] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        value = json.loads(line)
        if not isinstance(value, dict):
            raise ValueError(f"line {number} is not a JSON object: {line[:200]}")
        events.append(value)
    return events


def memory_status(home: Path) -> dict[str, Any]:
    """`evertalk memory status --json`, parsed."""
    run = run_evertalk(home, "memory", "status", "--json", timeout=120)
    if run.returncode != 0:
        raise AssertionError(run.describe())
    value = json.loads(run.stdout)
    if not isinstance(value, dict):
        raise AssertionError(f"memory status --json printed no object: {run.stdout[:500]}")
    return value


def ledger_records(home: Path) -> list[dict[str, Any]]:
    """The lines of `<home>/usage.jsonl` (SPEC §1.8) that parse; [] when there is none."""
    path = home / "usage.jsonl"
    if not path.exists():
        return []
    records: list[dict[str, Any]] = []
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        try:
            value = json.loads(line)
        except ValueError:
            continue
        if isinstance(value, dict):
            records.append(value)
    return records


def tree_records(home: Path) -> list[dict[str, Any]]:
    """Every node record of `<home>/chat/tree/*.jsonl` (SPEC §2.2)."""
    records: list[dict[str, Any]] = []
    for path in sorted((home / "chat" / "tree").glob("*.jsonl")):
        for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
            try:
                value = json.loads(line)
            except ValueError:
                continue
            if isinstance(value, dict) and "l" in value:
                records.append(value)
    return records


@dataclass
class CompactionFigures:
    """What the ledger and the tree say about the compaction calls: the figures of the issue."""

    calls: int = 0
    failed_calls: int = 0
    seconds: list[float] = field(default_factory=list)
    nodes_by_a_call: int = 0
    """Nodes built from a model's line (not free, not cut), from the tree files."""
    nodes_cut: int = 0
    rejected: int | None = None
    """Compaction replies refused by a check (the ledger's `rejected` reason); None when no
    record has the field, as in ledgers written before it existed."""
    reasons: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        ordered = sorted(self.seconds)
        middle = ordered[len(ordered) // 2] if ordered else None
        nodes = self.nodes_by_a_call + self.nodes_cut
        return {
            "compaction_calls": self.calls,
            "failed_calls": self.failed_calls,
            "nodes_built_by_a_call": self.nodes_by_a_call,
            "nodes_cut": self.nodes_cut,
            "calls_per_node": round(self.calls / nodes, 2) if nodes else None,
            "seconds_per_call_mean": round(sum(ordered) / len(ordered), 1) if ordered else None,
            "seconds_per_call_median": round(middle, 1) if middle is not None else None,
            "seconds_per_call_max": round(ordered[-1], 1) if ordered else None,
            "grounding_rejections": self.rejected,
            "rejected_share": round(self.rejected / self.calls, 3)
            if self.rejected is not None and self.calls
            else None,
            "rejection_reasons_sample": self.reasons[:3],
        }


def compaction_figures(
    records: list[dict[str, Any]], nodes: list[dict[str, Any]]
) -> CompactionFigures:
    """The figures from the ledger's compaction records and the tree's node records. Calls per
    node: every compaction call made, over the nodes that needed one (built from a model's
    line, or cut from their input after three failures)."""
    figures = CompactionFigures()
    figures.nodes_by_a_call = sum(1 for n in nodes if not n.get("free") and not n.get("cut"))
    figures.nodes_cut = sum(1 for n in nodes if n.get("cut"))
    for record in records:
        if record.get("role") != "compaction":
            continue
        figures.calls += 1
        if record.get("failed"):
            figures.failed_calls += 1
        duration = record.get("duration_ms")
        if isinstance(duration, int | float):
            figures.seconds.append(duration / 1000)
        if "rejected" in record:
            figures.rejected = (figures.rejected or 0) + (1 if record["rejected"] else 0)
            if isinstance(record["rejected"], str) and record["rejected"] not in figures.reasons:
                figures.reasons.append(record["rejected"])
    return figures
