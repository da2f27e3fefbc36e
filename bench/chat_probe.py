"""Measurements that need a fresh process (for honest open times and peak memory).

`python -m bench.chat_probe open CHAT_DIR` prints one JSON object;
`python -m bench.chat_probe rebuild CHAT_DIR` rebuilds the index and prints a line of figures.
"""

from __future__ import annotations

import json
import random
import resource
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from evertalk.chat import Chat
from evertalk.store import ChatStore


def peak_rss_mb() -> float:
    """This process's peak resident memory. Linux keeps `ru_maxrss` across exec, so a probe
    started by a big parent (the core replay before it) would report the parent's peak; the
    memory map's own high-water mark starts afresh at exec."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def probe_open(chat_dir: Path) -> dict[str, float]:
    started = time.perf_counter()
    chat = Chat.open(chat_dir)
    opened = time.perf_counter()
    view = chat.render_view()
    rendered = time.perf_counter()
    rng = random.Random(5)
    zooms = []
    for _ in range(2_000):
        level = rng.randrange(0, max(chat.t.bit_length() - 1, 1))
        count = 1 << level
        start = rng.randrange(0, chat.t // count) * count
        begin = time.perf_counter()
        chat.zoom(start, count)
        zooms.append(time.perf_counter() - begin)
    chat.close()
    return {
        "messages": chat.t,
        "open_s": opened - started,
        "render_s": rendered - opened,
        "view_bytes": len(view.encode()),
        "zoom_median_ms": statistics.median(zooms) * 1e3,
        "zoom_max_ms": max(zooms) * 1e3,
        "rss_mb": peak_rss_mb(),
        "warnings": len(chat.warnings),
    }


def probe_append(count: int = 400) -> dict[str, float]:
    folder = Path(tempfile.mkdtemp(prefix="evertalk-bench-"))
    rng = random.Random(9)
    try:
        with Chat.open(folder / "chat") as chat:
            times = []
            for k in range(count):
                text = f"message {k} " + "x" * rng.choice((10, 200, 700, 3000))
                begin = time.perf_counter()
                chat.append("user", text)
                times.append(time.perf_counter() - begin)
    finally:
        shutil.rmtree(folder)
    times.sort()
    return {
        "appends": count,
        "median_ms": statistics.median(times) * 1e3,
        "p99_ms": times[int(len(times) * 0.99) - 1] * 1e3,
    }


def _read_through(files: list[Path]) -> int:
    """Read every byte of `files` as `cat` would, into one reused buffer; the bytes read."""
    total, buffer = 0, bytearray(1 << 20)
    for path in files:
        with open(path, "rb", buffering=0) as file:
            while got := file.readinto(buffer):
                total += got
    return total


def probe_rebuild(chat_dir: Path) -> str:
    """The index rebuilt from the whole log, in CPU seconds, beside the time it takes to read
    the same files, measured in the same run (the floor any rebuild is held against)."""
    files = sorted(chat_dir.glob("main/*.jsonl")) + sorted(chat_dir.glob("tree/*.jsonl"))
    _read_through(files)  # into the page cache, where the rebuild finds them too
    started = time.process_time()
    size = _read_through(files)
    cat = time.process_time() - started
    shutil.rmtree(chat_dir / "index", ignore_errors=True)
    started = time.process_time()
    with ChatStore.open(chat_dir) as store:
        messages = store.message_count
    cpu = time.process_time() - started
    return (
        f"index rebuild CPU: {cpu:.1f} s for {messages:,} messages; reading the same "
        f"{size / 1e6:,.0f} MB: {cat:.2f} s CPU; rebuild = {cpu / cat:.0f}x the read"
    )


if __name__ == "__main__":
    what = sys.argv[1]
    if what == "rebuild":
        print(probe_rebuild(Path(sys.argv[2])), flush=True)
    else:
        result = probe_open(Path(sys.argv[2])) if what == "open" else probe_append()
        print(json.dumps(result))
