"""Measurements that need a fresh process (for honest open times and peak memory).

`python -m bench.chat_probe open CHAT_DIR` prints one JSON object (the hot paths' figures are
in hot_paths.py).
"""

from __future__ import annotations

import json
import random
import resource
import statistics
import sys
import time
from pathlib import Path

from evertalk.chat import Chat


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


if __name__ == "__main__":
    assert sys.argv[1] == "open"
    print(json.dumps(probe_open(Path(sys.argv[2]))))
