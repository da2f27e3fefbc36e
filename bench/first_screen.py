"""The terminal app's first screen: `evertalk` started in a real terminal (tmux) on a chat of
3,000 messages, timed until the last message shows.

Three starts: with the chat's service already running (a second window, or any start within
its idle time); with none (the app starts it, and both start side by side); and with none on a
chat with no tree, no index and no view.json (the service's open rebuilds them). The floor is
the same terminal showing the output of a bare `python -c print(...)`: what starting an
interpreter in tmux costs. Each figure is the median of a few runs. Needs tmux; without it the
probe says so and is skipped.
"""

from __future__ import annotations

import os
import random
import shlex
import shutil
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

MESSAGES = 3_000
RUNS = 5
WAIT = 30.0
POLL = 0.01
SETTLE = 5.0  # seconds
CONNECTING = "connecting to the service"


@dataclass(frozen=True)
class Start:
    """One way of starting: seconds until the log's last messages show, and until the window is
    connected to its service (the status bar no longer says it is connecting)."""

    shown_s: float
    connected_s: float

    def text(self) -> str:
        return f"{self.shown_s:.2f} s (connected {self.connected_s:.2f} s)"


@dataclass(frozen=True)
class FirstScreen:
    warm: Start
    cold: Start
    rebuilt: Start
    floor_s: float

    def line(self) -> str:
        return (
            f"app first screen, {MESSAGES:,}-message chat (target 1 s): {self.warm.text()} with "
            f"its service running; {self.cold.text()} starting it; {self.rebuilt.text()} "
            f"starting it on no tree, index or view.json; floor (a bare python printing in the "
            f"same terminal): {self.floor_s:.2f} s"
        )


@contextmanager
def _tmux(env: dict[str, str]) -> Iterator[list[str]]:
    base = ["tmux", "-L", f"evertalk-bench-{uuid.uuid4().hex[:10]}", "-f", "/dev/null"]
    try:
        yield base
    finally:
        subprocess.run([*base, "kill-server"], env=env, capture_output=True, timeout=10)


def _time_until(command: str, marker: str, env: dict[str, str]) -> Start:
    """Seconds from starting `command` in a new 120×40 terminal until `marker` shows, and until
    it shows with no CONNECTING beside it."""
    with _tmux(env) as base:
        begin = time.perf_counter()
        subprocess.run(
            [*base, "new-session", "-d", "-s", "main", "-x", "120", "-y", "40", command],
            env=env,
            check=True,
            timeout=10,
        )
        shown = None
        while time.perf_counter() - begin < WAIT:
            screen = subprocess.run(
                [*base, "capture-pane", "-p", "-t", "main"],
                env=env,
                capture_output=True,
                text=True,
                timeout=10,
            ).stdout
            if marker in screen:
                now = time.perf_counter() - begin
                shown = now if shown is None else shown
                if CONNECTING not in screen:
                    return Start(shown, now)
            time.sleep(POLL)
    raise RuntimeError(f"{marker!r} did not show, connected, within {WAIT} s")


def _home(folder: Path, base_url: str) -> Path:
    """A home with a config (no turn is sent) and a chat of MESSAGES, whose provider is at
    `base_url`."""
    from evertalk.chat import Chat

    home = folder / "home"
    home.mkdir(mode=0o700)
    config = home / "config.toml"
    config.write_text(
        'provider = "anthropic"\nmodel = "claude-sonnet-5-5"\napi_key = "sk-ant-bench-0000"\n'
        f'base_url = "{base_url}"\n'
        # a call ends after 2 s without a reply, so that `service stop` (which lets the calls in
        # flight land) is quick
        "[memory]\ndeadline = 2\n"
    )
    config.chmod(0o600)
    rng = random.Random(5)
    with Chat.open(home / "chat") as chat:
        for k in range(MESSAGES):
            kind = "user" if k % 2 == 0 else "ever"
            chat.append(kind, f"message {k} " + "words " * rng.choice((2, 20, 60, 140)))
    return home


def _strip(chat_dir: Path) -> None:
    shutil.rmtree(chat_dir / "tree")
    shutil.rmtree(chat_dir / "index")
    (chat_dir / "view.json").unlink()


def run() -> FirstScreen | None:
    if shutil.which("tmux") is None:
        return None
    folder = Path(tempfile.mkdtemp(prefix="evertalk-first-screen-"))
    # The provider: a port that takes connections and never answers, so that the service's
    # summaries stay in flight, as they wait on a real server. A refused port would fail each
    # at once, and the service would spend its first seconds trying every node in turn.
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(128)
    try:
        home = _home(folder, f"http://127.0.0.1:{silent.getsockname()[1]}")
        skip = ("EVERTALK_", "TMUX", "PYTHONDONTWRITEBYTECODE")
        env = {k: v for k, v in os.environ.items() if not k.startswith(skip)}
        # compiled modules cached as a user's install has them, kept out of the source tree
        env |= {"PYTHONPYCACHEPREFIX": str(folder / "pycache")}
        env |= {"EVERTALK_HOME": str(home), "TERM": "xterm-256color"}
        app = f"{shlex.quote(sys.executable)} -m evertalk"
        marker = f"message {MESSAGES - 1} "
        _time_until(app, marker, env)  # fills the cache, and leaves the service running
        # a window opened beside a service that has been running a while, as a second window
        # usually is: not one still loading the chat and starting its summaries (`cold` is)
        time.sleep(SETTLE)
        warm = [_time_until(app, marker, env) for _ in range(RUNS)]
        cold: list[Start] = []
        rebuilt: list[Start] = []
        for _ in range(RUNS):
            _stop_service(env)
            cold.append(_time_until(app, marker, env))
        for _ in range(RUNS):
            _stop_service(env)
            _strip(home / "chat")
            rebuilt.append(_time_until(app, marker, env))
        _stop_service(env)
        bare = f"{shlex.quote(sys.executable)} -c \"print('ready'); import time; time.sleep(5)\""
        floor = [_time_until(bare, "ready", env).shown_s for _ in range(RUNS)]
    finally:
        silent.close()
        shutil.rmtree(folder)
    return FirstScreen(_median(warm), _median(cold), _median(rebuilt), statistics.median(floor))


def _median(runs: list[Start]) -> Start:
    return Start(
        statistics.median(run.shown_s for run in runs),
        statistics.median(run.connected_s for run in runs),
    )


def _stop_service(env: dict[str, str]) -> None:
    command = [sys.executable, "-m", "evertalk", "service", "stop"]
    subprocess.run(command, env=env, capture_output=True, check=True, timeout=60)


if __name__ == "__main__":
    result = run()
    print(result.line() if result else "app first screen: tmux is not installed; skipped")
