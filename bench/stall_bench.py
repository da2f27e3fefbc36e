"""A window's frames while the database of a shared chat goes silent.

`python -m bench.stall_bench` (also part of `make bench`). A throwaway PostgreSQL server behind a
relay that can hold every byte both ways (tests_chaos/proxy.py: a network gone silent), and a
home whose chat is kept there, its service run in a thread of this process as `evertalk serve`
runs. Its model is the Anthropic fake on loopback, whose turn streams a long reply, a chunk
every 20 ms. The window is a client on the service's socket that notes when each frame comes.
Another machine logs a long note every 0.2 s on the database itself, so that the service has
changes to fold and summaries to claim. Two seconds into the stream the relay holds every byte
for 10 s.

The figures: the frames the window got while the database was silent, the longest wait between
two of them and the 99th percentile (target: each within 50 ms); and, the database answering
again, the time from the stream's last frame to the turn's end (its reply logged).
"""

from __future__ import annotations

import contextlib
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

from bench.service_thread import service_in_thread
from evertalk.client.connection import connect
from evertalk.protocol import events, replies, requests

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # the fakes, the throwaway server
sys.path.insert(0, str(ROOT))  # the checker's relay

from tests_chaos.proxy import Proxy  # noqa: E402

from fakes import AnthropicFake, Call, Script, reply, serve, summarizer  # noqa: E402
from home_config import write_config  # noqa: E402
from office_writer import keep_logging  # noqa: E402
from pg_server import missing, start_server  # noqa: E402

STALL = 10.0
BEFORE = 2.0  # seconds of stream before the database goes silent
CHUNK_DELAY = 0.02
WORDS = 3_800  # "word " in chunks of 24 bytes: about 800 chunks, 16 s of stream
TARGET = 0.050


@dataclass(frozen=True)
class Result:
    frames: int
    longest: float
    p99: float
    logged_after: float

    def lines(self) -> list[str]:
        return [
            f"a window while its shared chat's database is silent for {STALL:g} s: "
            f"{self.frames} frames, longest wait {self.longest * 1e3:.0f} ms, p99 "
            f"{self.p99 * 1e3:.0f} ms (target: each within {TARGET * 1e3:.0f} ms); once it "
            f"answered, the turn ended {self.logged_after * 1e3:.0f} ms after its stream, its "
            "reply logged"
        ]


@dataclass(frozen=True)
class Skipped:
    why: str

    def lines(self) -> list[str]:
        return [f"a window while the database is silent: skipped, {self.why}"]


def run() -> Result | Skipped:
    why = missing()
    if why is not None:
        return Skipped(why)
    server = start_server()
    try:
        url = server.create_database("stall")
        with tempfile.TemporaryDirectory() as folder, _relay(server.port) as relay:
            return _measure(Path(folder), url, relay)
    finally:
        server.stop()


def _measure(folder: Path, url: str, relay: Proxy) -> Result:
    story = reply("word " * WORDS, chunk_delay=CHUNK_DELAY)
    script = Script(story).route(_is_compaction, summarizer(100))
    fake = AnthropicFake(script)
    stop = threading.Event()
    office = threading.Thread(target=keep_logging, args=(url, folder / "office", stop))
    with serve(fake.app) as base_url:
        home = folder / "home"
        write_config(home, base_url=base_url, more=["", "[store]", f'url = "{relay.url(url)}"'])
        with service_in_thread(home):
            office.start()
            try:
                return _window(home, relay)
            finally:
                relay.heal()
                stop.set()
                office.join()


def _window(home: Path, relay: Proxy) -> Result:
    conn = connect(home, "window")
    try:
        conn.request(requests.Send(text="tell me a long story", key="stall-1"), replies.Accepted)
        times: list[float] = []
        marks: dict[str, float] = {}
        while True:
            frame = conn.receive()
            now = time.monotonic()
            if isinstance(frame, events.TurnEnded):
                ended = now
                break
            times.append(now)
            if isinstance(frame, events.TextDelta) and not marks:
                marks["first"] = now
                _at(BEFORE, lambda: _mark(marks, "stalled", relay.stall))
                _at(BEFORE + STALL, lambda: _mark(marks, "healed", relay.heal))
    finally:
        conn.close()
    stalled, healed = marks["stalled"], marks["healed"]
    during = [t for t in times if stalled <= t <= healed]
    gaps = [b - a for a, b in zip([stalled, *during], [*during, healed], strict=True)]
    p99 = statistics.quantiles(gaps, n=100)[98] if len(gaps) > 1 else gaps[0]
    return Result(len(during), max(gaps), p99, ended - times[-1])


def _mark(marks: dict[str, float], name: str, then: Callable[[], None]) -> None:
    then()
    marks[name] = time.monotonic()


def _at(seconds: float, action: Callable[[], None]) -> None:
    timer = threading.Timer(seconds, action)
    timer.daemon = True
    timer.start()


def _is_compaction(call: Call) -> bool:
    return call.body.get("tool_choice") in ({"type": "none"}, "none")


@contextlib.contextmanager
def _relay(port: int) -> Iterator[Proxy]:
    proxy = Proxy(port)
    try:
        yield proxy
    finally:
        proxy.close()


if __name__ == "__main__":
    for line in run().lines():
        print(line)
