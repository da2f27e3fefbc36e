"""Run every benchmark and print its figures: `make bench` (or `python -m bench [MESSAGES]`)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

from bench import (
    browse_bench,
    cache_replay,
    catchup,
    chat_gen,
    compaction_parallel,
    core_replay,
    edge_timings,
    first_byte,
    first_screen,
    forget_bench,
    hot_paths,
    import_bench,
    p_client,
    pg_bench,
    recall_bench,
    search_bench,
    service_bench,
    stall_bench,
    status_bench,
    undo_bench,
)

OUT = Path(__file__).with_name("out")


def main() -> int:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    runs = sorted((core_replay.run(count) for _ in range(3)), key=lambda r: r["messages_per_s"])
    result = runs[1]  # the median of three: a shared machine's noise moves single runs a lot
    print(
        f"core replay: {result['messages']:,} messages in {result['seconds']:.1f} s = "
        f"{result['messages_per_s']:,.0f} messages/s, median of 3 "
        f"(range {runs[0]['messages_per_s']:,.0f}–{runs[2]['messages_per_s']:,.0f}; "
        f"view {result['view_lines']} lines, {result['view_bytes']:,} B; "
        f"cview {result['cview_bytes']:,} B)",
        flush=True,
    )
    chat_dir = chat_gen.generated_once(OUT, count)
    shutil.rmtree(chat_dir / "index", ignore_errors=True)
    rebuild = _probe("open", chat_dir)
    print(
        f"open with no index (rebuilt): {rebuild['open_s']:.1f} s wall for "
        f"{rebuild['messages']:,} messages (peak RSS {rebuild['rss_mb']:.0f} MB)",
        flush=True,
    )
    warm = _probe("open", chat_dir)
    print(
        f"open with index: {warm['open_s'] * 1e3:.0f} ms; zoom median "
        f"{warm['zoom_median_ms']:.2f} ms, max {warm['zoom_max_ms']:.2f} ms",
        flush=True,
    )
    print(status_bench.run(chat_dir).line(), flush=True)
    print(status_bench.scaling().line(), flush=True)
    for line in hot_paths.report(chat_dir):
        print(line, flush=True)
    browse = browse_bench.run(chat_dir)
    print(browse if isinstance(browse, str) else browse.line(), flush=True)
    for line in service_bench.run().lines():
        print(line, flush=True)
    print(p_client.run().line(), flush=True)
    for line in import_bench.run().lines():
        print(line, flush=True)
    print(first_byte.run().line(), flush=True)
    print(undo_bench.run().line(), flush=True)
    screen = first_screen.run()
    print(screen.line() if screen else "app first screen: tmux is not installed; skipped")
    cache = cache_replay.run()
    print(cache.line())
    print(cache.detail())
    print(cache_replay.first_turns().line(), flush=True)
    print(compaction_parallel.run().line(), flush=True)
    print(catchup.run().line(), flush=True)
    for line in recall_bench.run().lines():
        print(line, flush=True)
    for line in search_bench.run(chat_dir).lines():
        print(line, flush=True)
    for line in forget_bench.run(count).lines():
        print(line, flush=True)
    for line in edge_timings.run().lines():
        print(line, flush=True)
    for line in pg_bench.run().lines():
        print(line, flush=True)
    for line in stall_bench.run().lines():
        print(line, flush=True)
    return 0


def _probe(*args: object) -> dict[str, float]:
    command = [sys.executable, "-m", "bench.chat_probe", *map(str, args)]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    result: dict[str, float] = json.loads(done.stdout)
    return result


if __name__ == "__main__":
    raise SystemExit(main())
