"""The slow figures of the page, the sawtooth and the usage ledger, worked out in a process of
their own: at a million messages the sawtooth takes seconds of CPU, which in the server's own
process would hold up every drill-down meanwhile (one interpreter lock). The server keeps the
latest answer and asks again once the chat or the ledger changed.

`python -m evertalk.browse.jobs sawtooth CHAT_DIR` and `… usage LEDGER` print one JSON object.
"""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Callable, Hashable
from pathlib import Path
from typing import Any

JOB_SECONDS = 600.0

Json = dict[str, Any]


def sawtooth_json(chat_dir: Path) -> Json:
    from evertalk.chat import Chat
    from evertalk.memory.sawtooth import sawtooth

    chat = Chat.open(chat_dir, readonly=True)
    try:
        found = sawtooth(chat.core.tree, chat.core.budget)
    finally:
        chat.close()
    return {
        "ready": True,
        "t": found.t,
        "budget": list(found.budget.sizes()),
        "batches": found.batches,
        "fits": found.fits,
        # first, last, view, view low, view high, cview, cview low, cview high
        "stretches": [stretch.as_list() for stretch in found.stretches],
    }


def usage_json(ledger: Path) -> Json:
    from evertalk.usage_cli import read_usage

    return {"ready": True, **read_usage(ledger).as_frame()}


class Background:
    """The latest answer of one job, worked out again in a child process when `key()` changes
    (one run at a time); None until the first run ends."""

    def __init__(self, args: list[str], key: Callable[[], Hashable]) -> None:
        self.args = args
        self.key = key
        self._lock = threading.Condition()
        self._answer: Json | None = None
        self._answer_key: Hashable = object()  # equal to no key: the first get runs
        self._running = False

    def get(self) -> Json | None:
        key = self.key()
        with self._lock:
            if key != self._answer_key and not self._running:
                self._running = True
                threading.Thread(target=self._run, args=(key,), daemon=True).start()
            return self._answer

    def _run(self, key: Hashable) -> None:
        answer: Json | None
        try:
            done = subprocess.run(
                [sys.executable, "-m", "evertalk.browse.jobs", *self.args],
                capture_output=True,
                text=True,
                timeout=JOB_SECONDS,
            )
            answer = json.loads(done.stdout) if done.returncode == 0 else _failed(done.stderr)
        except (OSError, subprocess.TimeoutExpired, ValueError) as error:
            answer = _failed(str(error))
        with self._lock:
            self._answer, self._answer_key, self._running = answer, key, False
            self._lock.notify_all()

    def wait(self, timeout: float) -> Json | None:
        """The answer once no run is going on (or the timeout passed)."""
        with self._lock:
            self._lock.wait_for(lambda: not self._running, timeout)
            return self._answer


def _failed(why: str) -> Json:
    lines = why.strip().splitlines()
    return {"ready": True, "error": lines[-1] if lines else "the job failed"}


def main(argv: list[str]) -> int:
    if len(argv) != 2 or argv[0] not in ("sawtooth", "usage"):
        print(
            "usage: python -m evertalk.browse.jobs sawtooth CHAT_DIR | usage LEDGER",
            file=sys.stderr,
        )
        return 2
    job = sawtooth_json if argv[0] == "sawtooth" else usage_json
    print(json.dumps(job(Path(argv[1]))))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
