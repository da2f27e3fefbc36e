"""The hot paths of the store, each figure beside its floor measured in the same run.

`python -m bench.hot_paths CHAT_DIR` (a generated chat, the 1,000,000-message one under
`make bench`); each probe that measures memory or an open runs in a fresh process.

- append: `Chat.append` of a message, median and p99, beside a bare 200-byte append + fsync
  on the same disk; and the fsyncs per message, by file.
- turns: ten `-p` turns with the compactor at work against the Anthropic fake, the service run
  in this process (its fsyncs counted) and `-p` its client over the socket: fsyncs by file
  over the whole run, beside the durable records written (log lines and tree records written
  by a model or cut; free nodes are derived, and the usage ledger is not synced).
- no-tree open: a 3,000-message chat whose tree and index are gone (an import, a lost tree),
  opened as the app opens it, beside a fold of the same messages through the bare core.
- render: the view of the big chat rendered again (as at every turn), beside joining the same
  lines; and the first render after the open.
- rebuild: the index rebuilt from the big chat's log, in CPU seconds, beside `cat` of the
  same files (its CPU, in the same run), and beside decoding every line of them with the
  rebuild's own decoders and doing nothing else, the floor of a rebuild that checks every line.
- memory: peak RSS of opening the big chat and rendering its view, beside a process that only
  imports the same modules, plus one copy of the tree's sizes and flags.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

NO_TREE_MESSAGES = 3_000


def _fsyncs() -> tuple[Counter[str], contextlib.AbstractContextManager[None]]:
    """A counter of fsyncs by file name, and the context in which they are counted."""
    counts: Counter[str] = Counter()
    real = os.fsync

    def fsync(fd: int) -> None:
        name = Path(os.readlink(f"/proc/self/fd/{fd}")).name
        counts[name if not name[:4].isdigit() else "day file " + name] += 1
        real(fd)

    @contextlib.contextmanager
    def counting() -> Iterator[None]:
        os.fsync = fsync  # type: ignore[assignment]
        try:
            yield
        finally:
            os.fsync = real

    return counts, counting()


def _bare_fsync_ms(folder: Path, count: int = 200) -> float:
    path = folder / "floor.jsonl"
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    times = []
    try:
        for _ in range(count):
            begin = time.perf_counter()
            os.write(fd, b"x" * 199 + b"\n")
            os.fsync(fd)
            times.append(time.perf_counter() - begin)
    finally:
        os.close(fd)
    return statistics.median(times) * 1e3


def probe_append(count: int = 400) -> dict[str, object]:
    from evertalk.chat import Chat

    folder = Path(tempfile.mkdtemp(prefix="evertalk-bench-"))
    rng = random.Random(9)
    counts, counting = _fsyncs()
    try:
        floor = _bare_fsync_ms(folder)
        with Chat.open(folder / "chat") as chat:
            chat.append("user", "the day's files exist from here on")
            times = []
            with counting:
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
        "fsync_ms": floor,
        "fsyncs": dict(counts),
    }


def probe_turns(turns: int = 10) -> dict[str, object]:
    """Fsyncs over `turns` one-turn `-p` runs, each message and reply long enough that its leaf
    needs a model call, the compactor answering at once."""
    from bench.headless_drain import _configure, prose
    from bench.service_thread import service_in_thread
    from evertalk.chat import Chat
    from fakes import AnthropicFake, Reply, Script, Text, serve, summarizer

    rng = random.Random(7)
    replies = Script(lambda call: Reply(pieces=(Text("Noted: " + prose(rng, 150)),)))
    replies.route(lambda call: call.body.get("tool_choice") == {"type": "none"}, summarizer(200))
    fake = AnthropicFake(replies, ping=False)
    home = Path(tempfile.mkdtemp(prefix="evertalk-turns-"))
    counts, counting = _fsyncs()
    try:
        with serve(fake.app) as url:
            _configure(home, url)
            with service_in_thread(home):
                run_p_quietly(home, "the first message: " + prose(rng, 150))
            with Chat.open(home / "chat", readonly=True) as chat:
                before = chat.t, _durable_nodes(chat)
            # the service in this process: its fsyncs are counted, its summaries land at the stop
            with counting, service_in_thread(home):
                for k in range(turns):
                    run_p_quietly(home, f"note {k}: " + prose(rng, 150))
        with Chat.open(home / "chat", readonly=True) as chat:
            messages, nodes = chat.t - before[0], _durable_nodes(chat) - before[1]
    finally:
        shutil.rmtree(home, ignore_errors=True)
    return {"turns": turns, "messages": messages, "nodes": nodes, "fsyncs": dict(counts)}


def run_p_quietly(home: Path, message: str) -> None:
    """One `-p` turn, a client of the service already serving `home`."""
    from evertalk.client.headless import run_via_service

    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        if run_via_service(home, message, start=False) != 0:
            raise RuntimeError("a -p turn of the benchmark failed")


def _durable_nodes(chat: object) -> int:
    from evertalk.chat import Chat
    from evertalk.memory.tree import BUILT, CUT

    assert isinstance(chat, Chat)
    return sum(row.count(BUILT) + row.count(CUT) for row in chat.core.tree.flags)


def probe_no_tree_open() -> dict[str, object]:
    from evertalk.chat import Chat
    from evertalk.memory import MemoryCore

    folder = Path(tempfile.mkdtemp(prefix="evertalk-notree-"))
    chat_dir = folder / "chat"
    rng = random.Random(11)
    texts = [
        f"message {k} " + "x" * rng.choice((10, 100, 300, 700, 2000))
        for k in range(NO_TREE_MESSAGES)
    ]
    try:
        with Chat.open(chat_dir) as chat:
            for text in texts:
                chat.append("user", text)
        shutil.rmtree(chat_dir / "tree")
        shutil.rmtree(chat_dir / "index")
        (chat_dir / "view.json").unlink()
        counts, counting = _fsyncs()
        with counting:
            begin = time.perf_counter()
            with Chat.open(chat_dir) as chat:
                opened = time.perf_counter() - begin
                lines = len(chat.core.view)
        begin = time.perf_counter()
        core = MemoryCore()
        for text in texts:
            core.append("user", text)
        fold = time.perf_counter() - begin
    finally:
        shutil.rmtree(folder)
    return {"open_s": opened, "fold_s": fold, "view_lines": lines, "fsyncs": sum(counts.values())}


def probe_big(chat_dir: Path) -> dict[str, object]:
    """Open the big chat, render its view (first, then again and again), peak RSS."""
    from bench.chat_probe import peak_rss_mb
    from evertalk.chat import Chat

    with Chat.open(chat_dir) as chat:
        begin = time.perf_counter()
        first = chat.render_view()
        first_s = time.perf_counter() - begin
        times = []
        for _ in range(200):
            begin = time.perf_counter()
            chat.render_view()
            times.append(time.perf_counter() - begin)
        lines = first.split("\n")
        joins = []
        for _ in range(200):
            begin = time.perf_counter()
            "\n".join(lines)
            joins.append(time.perf_counter() - begin)
        arrays = sum(len(row) * row.itemsize for row in chat.core.tree.sizes)
        arrays += sum(len(row) for row in chat.core.tree.flags)
        messages = chat.t
    return {
        "messages": messages,
        "view_lines": len(lines) - 2,
        "first_render_ms": first_s * 1e3,
        "render_ms": statistics.median(times) * 1e3,
        "join_ms": statistics.median(joins) * 1e3,
        "rss_mb": peak_rss_mb(),
        "arrays_mb": arrays / 2**20,
    }


def probe_imports() -> dict[str, object]:
    from bench.chat_probe import peak_rss_mb
    from evertalk.chat import Chat

    assert Chat
    return {"rss_mb": peak_rss_mb()}


def probe_cat(chat_dir: Path) -> dict[str, object]:
    files = sorted(chat_dir.glob("main/*.jsonl")) + sorted(chat_dir.glob("tree/*.jsonl"))
    subprocess.run(["cat", *map(str, files)], stdout=subprocess.DEVNULL, check=True)  # cache
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run(["cat", *map(str, files)], stdout=subprocess.DEVNULL, check=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"cat_cpu_s": cpu, "bytes": sum(path.stat().st_size for path in files)}


def probe_decode(chat_dir: Path) -> dict[str, object]:
    from evertalk.store.fast_lines import REFUSED, decode_message_line, decode_node_line
    from evertalk.store.jsonl import Scan

    refused = 0
    begin = time.process_time()
    for folder, decode in (("main", decode_message_line), ("tree", decode_node_line)):
        for path in sorted((chat_dir / folder).glob("*.jsonl")):
            for batch in Scan(path).batches():
                for raw in batch.lines:
                    try:
                        decode(raw)
                    except REFUSED:
                        refused += 1
    return {"cpu_s": time.process_time() - begin, "refused": refused}


def probe_rebuild(chat_dir: Path) -> dict[str, object]:
    from evertalk.store import ChatStore

    shutil.rmtree(chat_dir / "index", ignore_errors=True)
    begin = time.process_time()
    with ChatStore.open(chat_dir) as store:
        messages = store.message_count
    return {"messages": messages, "cpu_s": time.process_time() - begin}


def _probe(*args: object) -> dict[str, object]:
    command = [sys.executable, "-m", "bench.hot_paths", *map(str, args)]
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    result: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _fsync_text(counts: object) -> str:
    assert isinstance(counts, dict)
    return ", ".join(f"{name} {n}" for name, n in sorted(counts.items(), key=lambda x: -x[1]))


def report(chat_dir: Path) -> list[str]:
    """Every figure, a line each, beside its floor."""
    out = []
    a = _probe("append")
    fsyncs = sum(a["fsyncs"].values()) if isinstance(a["fsyncs"], dict) else 0
    out.append(
        f"append: median {a['median_ms']:.2f} ms, p99 {a['p99_ms']:.2f} ms; floor (a bare "
        f"200-byte append + fsync): {a['fsync_ms']:.2f} ms; {fsyncs / float(str(a['appends'])):.2f}"
        f" fsyncs per message ({_fsync_text(a['fsyncs'])})"
    )
    turns = _probe("turns")
    records = int(str(turns["messages"])) + int(str(turns["nodes"]))
    total = sum(turns["fsyncs"].values()) if isinstance(turns["fsyncs"], dict) else 0
    out.append(
        f"{turns['turns']} -p turns, compactor at work: {total} fsyncs for {records} durable "
        f"records ({turns['messages']} messages, {turns['nodes']} nodes by the model); floor: "
        f"one each; by file: {_fsync_text(turns['fsyncs'])}"
    )
    n = _probe("no-tree")
    out.append(
        f"open of a {NO_TREE_MESSAGES:,}-message chat with no tree and no index: "
        f"{n['open_s']:.2f} s, {n['fsyncs']} fsyncs (target 0.5 s); floor (the bare core "
        f"folding the same messages): {n['fold_s']:.2f} s"
    )
    big = _probe("big", chat_dir)
    base = _probe("imports")
    out.append(
        f"render of the view at {int(str(big['messages'])):,} messages ({big['view_lines']} "
        f"lines): {big['render_ms']:.2f} ms (first after the open {big['first_render_ms']:.1f} "
        f"ms; target 1 ms); floor (joining the same lines): {big['join_ms']:.3f} ms"
    )
    floor = float(str(base["rss_mb"])) + float(str(big["arrays_mb"]))
    out.append(
        f"peak RSS, open + render at {int(str(big['messages'])):,} messages: "
        f"{big['rss_mb']:.0f} MB; floor (the imports alone, {base['rss_mb']:.0f} MB, + one "
        f"copy of the sizes and flags, {big['arrays_mb']:.1f} MB): {floor:.0f} MB"
    )
    cat = _probe("cat", chat_dir)
    rebuild = _probe("rebuild", chat_dir)
    decode = _probe("decode", chat_dir)
    cpu, cat_cpu = float(str(rebuild["cpu_s"])), max(float(str(cat["cat_cpu_s"])), 1e-9)
    decode_cpu = float(str(decode["cpu_s"]))
    out.append(
        f"index rebuild at {int(str(rebuild['messages'])):,} messages: {cpu:.1f} s CPU (target "
        f"8 s); floor (`cat` of the same {int(str(cat['bytes'])) / 1e6:,.0f} MB): "
        f"{cat_cpu:.2f} s CPU; rebuild = {cpu / cat_cpu:.0f}x cat (target 15x); decoding "
        f"each line alone: {decode_cpu:.1f} s CPU = {decode_cpu / cat_cpu:.0f}x cat"
    )
    return out


def main() -> int:
    what = sys.argv[1]
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))  # the fakes
    probes = {
        "append": lambda: probe_append(),
        "turns": lambda: probe_turns(),
        "no-tree": lambda: probe_no_tree_open(),
        "big": lambda: probe_big(Path(sys.argv[2])),
        "imports": lambda: probe_imports(),
        "cat": lambda: probe_cat(Path(sys.argv[2])),
        "rebuild": lambda: probe_rebuild(Path(sys.argv[2])),
        "decode": lambda: probe_decode(Path(sys.argv[2])),
    }
    if what in probes:
        print(json.dumps(probes[what]()))
        return 0
    for line in report(Path(what)):
        print(line, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
