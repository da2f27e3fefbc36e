"""The search index at a million messages: its build from nothing (CPU, wall, size on disk)
and the time of queries of three shapes (a rare word, a common word, a phrase), end to end as
`evertalk memory search` runs them: caught-up check, ranking, snippets, dates, view lines.

`python -m bench.search_bench [MESSAGES]` runs it alone on the generated chat.
"""

from __future__ import annotations

import statistics
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from evertalk.chat import Chat
from evertalk.memory_search import search
from evertalk.store.search_index import SEARCH_NAME, SearchIndex

TARGET_MS = 50.0
LIMIT = 10

QUERIES: dict[str, tuple[str, ...]] = {
    # node numbers: each names one to three summaries of chat_gen's tree
    "rare word": ("123457", "999951", "48213", "4242", "65536", "31337", "500001"),
    # chat_gen draws every text from twelve words: each is in most messages
    "common word": ("rotate", "the", "backup", "error", "merge", "notes", "view"),
    "phrase": (
        "error fixed",
        "backup notes file",
        "summary of",
        "the log rotate",
        "config tests view",
        "merge error merge",
    ),
}


@dataclass
class SearchFigures:
    messages: int
    build_wall_s: float
    build_cpu_s: float
    size_bytes: int
    records: int
    times_ms: dict[str, list[float]] = field(default_factory=dict)

    def lines(self) -> list[str]:
        every = [ms for times in self.times_ms.values() for ms in times]
        shapes = "; ".join(
            f"{shape} median {statistics.median(times):.1f} ms, max {max(times):.1f} ms"
            for shape, times in self.times_ms.items()
        )
        verdict = "within" if max(every) <= TARGET_MS else "OVER"
        return [
            f"search index build: {self.messages:,} messages ({self.records:,} records read) in "
            f"{self.build_wall_s:.0f} s wall, {self.build_cpu_s:.0f} s CPU; "
            f"{self.size_bytes / 1e6:,.0f} MB on disk",
            f"search query ({len(every)} queries, {LIMIT} hits each, median of 3 runs): median "
            f"{statistics.median(every):.1f} ms, max {max(every):.1f} ms, {verdict} the "
            f"{TARGET_MS:.0f} ms target ({shapes})",
        ]


def run(chat_dir: Path) -> SearchFigures:
    for old in chat_dir.joinpath("index").glob(f"{SEARCH_NAME}*"):
        old.unlink()
    with Chat.open(chat_dir, readonly=True) as chat:
        wall, cpu = time.perf_counter(), time.process_time()
        index = SearchIndex.open(chat_dir)
        try:
            records = index.catch_up(chat.store)
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            size = sum(f.stat().st_size for f in chat_dir.joinpath("index").glob(f"{SEARCH_NAME}*"))
            figures = SearchFigures(chat.t, wall, cpu, size, records)
            search(chat, index, "warm up the caches", LIMIT)
            for shape, queries in QUERIES.items():
                figures.times_ms[shape] = [_timed(chat, index, query) for query in queries]
        finally:
            index.close()
    return figures


def _timed(chat: Chat, index: SearchIndex, query: str) -> float:
    """The median of three runs: a shared machine's noise moves single runs a lot."""
    times = []
    for _ in range(3):
        started = time.perf_counter()
        found = search(chat, index, query, LIMIT)
        times.append((time.perf_counter() - started) * 1e3)
        assert found.hits, f"no hit for {query!r}: the generated chat should hold it"
    return statistics.median(times)


if __name__ == "__main__":
    from bench.chat_gen import generated_once

    count = int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000
    for line in run(generated_once(Path(__file__).with_name("out"), count)).lines():
        print(line, flush=True)
