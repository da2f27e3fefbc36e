"""The PostgreSQL store's speeds, beside the file store's where both do the same thing.

`python -m bench.pg_bench` (also part of `make bench`). A throwaway server is started the way
the tests start theirs (tests/pg_server.py), but with fsync on, PostgreSQL's default: every
commit then waits for the disk, as every append of the file store does. The chats belong to a
plain role, so that row-level security is paid for as a user would pay for it.

1. append: median and p99 of 500 single appends, each a synchronous commit, and messages per
   second over 5,000 appended one at a time; the file store's figures on the same disk.
2. zoom: median time to read a node's two children and one of its messages (target 10 ms).
3. open: the service's open of a chat of N messages, every node built (N = 1,048,576, or as
   many as could be copied in five minutes): the tree's shape, the views, the nodes and
   messages the view needs, the memory core resumed (target 1 s).
4. two machines: two shared chats (as two services hold them), each appending 2,000 messages
   from its own thread: the total messages per second, whether the ids came out dense, and
   whether both hold the same views after.
5. distance: appends and a turn (three appends, one save of the views) through a relay that
   holds every chunk 20 ms each way, as a database 40 ms of round trip away.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import shutil
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from bench.chat_gen import WORDS
from evertalk.memory import MemoryCore
from evertalk.memory.nodes import Node
from evertalk.memory.text import utf8_len
from evertalk.memory.tree import BUILT, Built
from evertalk.pgstore.connect import Connection, connect
from evertalk.pgstore.pgchat import PgChat
from evertalk.pgstore.session import PgSession
from evertalk.pgstore.turns import TurnLock
from evertalk.shared_chat import SharedChat
from evertalk.store.chat_dir import ChatStore
from evertalk.store.records import MessageRecord, NodeRecord

TESTS = Path(__file__).resolve().parent.parent / "tests"
sys.path.insert(0, str(TESTS))  # the tests' throwaway server

from pg_server import PgServer, find_binaries, missing  # noqa: E402

ROLE = "bench"
TEXT = " ".join(WORDS * 3)  # about 180 bytes: a short message
LATENCY_APPENDS = 500
THROUGHPUT_APPENDS = 5_000
ZOOMS = 500
FILL_SECONDS = 300.0  # the most the copy may take, on a slow machine
FILL_MESSAGES = 1 << 20
FILL_BATCH = 8_192
OPENS = 5
WRITERS = 2
WRITER_APPENDS = 2_000
DELAY = 0.020
DISTANT_APPENDS = 20
DISTANT_TURNS = 5
TURN_APPENDS = 3


class DurableServer(PgServer):
    """The tests' server, started with fsync on (the tests turn it off, to run faster)."""

    settings = "-c max_connections=20"


@contextlib.contextmanager
def durable_server() -> Iterator[PgServer]:
    binaries = find_binaries()
    assert binaries is not None
    server = DurableServer(Path(tempfile.mkdtemp(prefix="evertalk-pgbench-", dir="/tmp")), binaries)
    try:
        server.init()
        server.start()
        yield server
    finally:
        server.stop()


def ms(seconds: float) -> str:
    return f"{seconds * 1e3:.2f} ms"


def p99(values: list[float]) -> float:
    return statistics.quantiles(values, n=100)[98]


# 1. Appends


@dataclass(frozen=True)
class Appends:
    times: list[float]
    per_s: float

    @property
    def median(self) -> float:
        return statistics.median(self.times)


def appends(append: Callable[[str], object]) -> Appends:
    times = []
    for _ in range(LATENCY_APPENDS):
        started = time.perf_counter()
        append(TEXT)
        times.append(time.perf_counter() - started)
    started = time.perf_counter()
    for _ in range(THROUGHPUT_APPENDS):
        append(TEXT)
    return Appends(times, THROUGHPUT_APPENDS / (time.perf_counter() - started))


def database_appends(conn: Connection) -> Appends:
    chat = PgChat.open(conn, "appends", machine="bench")
    return appends(lambda text: chat.append_message("user", text))


def file_appends() -> Appends:
    folder = Path(tempfile.mkdtemp(prefix="evertalk-pgbench-files-"))
    try:
        with ChatStore.open(folder / "chat") as store:
            return appends(lambda text: store.append_message("user", text))
    finally:
        shutil.rmtree(folder, ignore_errors=True)


# 3. A long chat, copied in batches as `evertalk store push` copies one


@dataclass
class LongChat:
    chat: PgChat
    core: MemoryCore
    seconds: float = 0.0
    nodes: int = 0


def fill(conn: Connection, budget: float) -> LongChat:
    """Messages and their nodes (every one built, the free ones by the core) in batches of
    FILL_BATCH, until `budget` seconds are spent; then the core's views."""
    rng = random.Random(3)
    long = LongChat(PgChat.open(conn, "long", machine="bench"), MemoryCore())
    core = long.core
    started = time.perf_counter()
    while core.t < FILL_MESSAGES and time.perf_counter() - started < budget:
        records: list[MessageRecord] = []
        built: list[NodeRecord] = []
        for t in range(core.t, core.t + FILL_BATCH):
            kind = ("user", "ever", "tool", "echo")[t % 4]
            text = " ".join(rng.choices(WORDS, k=rng.choice((3, 12, 60, 110))))
            date = f"2026-11-28T{t // 3600 % 24:02d}:{t // 60 % 60:02d}:{t % 60:02d}+00:00"
            records.append(MessageRecord(t, kind, text, utf8_len(text), date))
            built += map(node_record, core.append(kind, text))
            while (node := next_node(core, t)) is not None:
                words = rng.choices(WORDS, k=rng.randrange(20, 45))
                line = f"summary of {node}: " + " ".join(words)
                built.append(NodeRecord(node[0], node[1], line, utf8_len(line), BUILT))
                built += map(node_record, core.build(node, line))
        long.chat.insert_records(records)
        long.nodes += long.chat.insert_nodes(built)
    long.chat.save_views(core.saved())
    long.seconds = time.perf_counter() - started
    return long


def node_record(built: Built) -> NodeRecord:
    return NodeRecord(built.level, built.index, built.text, utf8_len(built.text), built.flag)


def next_node(core: MemoryCore, t: int) -> Node | None:
    """The next node to build at once: message t's leaf, then every merge that may start."""
    if not core.tree.built_at(0, t):
        return (0, t)
    return core.queues.first_merge(core.tree)


def open_times(url: str) -> tuple[list[float], int]:
    """Each open's time through the service's own path (the chat's shape, its views, the
    nodes and messages its view needs, the memory core resumed), on a new connection; the
    view's lines."""
    times, lines = [], 0
    for _ in range(OPENS):
        with tempfile.TemporaryDirectory() as folder:
            session = PgSession(url, "bench reader", name="long")
            started = time.perf_counter()
            chat = SharedChat.open_shared(session, Path(folder) / "chat", readonly=True)
            times.append(time.perf_counter() - started)
            try:
                lines = len(chat.view_nodes())
                assert chat.render_view()
            finally:
                chat.close()
    return times, lines


# 2. Zoom


def zoom_times(long: LongChat) -> list[float]:
    """A parent's two children and its first message, for ZOOMS parents: a level drawn at
    random, then a node of it."""
    rng = random.Random(5)
    chat, flags = long.chat, long.core.tree.flags
    times = []
    for _ in range(ZOOMS):
        level = rng.randrange(1, len(flags))
        index = rng.randrange(len(flags[level]))
        started = time.perf_counter()
        left = chat.read_node(level - 1, 2 * index)
        right = chat.read_node(level - 1, 2 * index + 1)
        message = chat.read_message(index << level)
        times.append(time.perf_counter() - started)
        assert left is not None and right is not None and message.i == index << level
    return times


# 4. Two writers


def two_writers(url: str) -> tuple[float, bool]:
    """Messages per second of two machines' chats appending at once, each from its own thread
    as each service would (every append folded back from the feed, the other's in between);
    whether the ids came out dense and both machines hold the same views after."""
    with tempfile.TemporaryDirectory() as folder:
        chats = [
            SharedChat.open_shared(
                PgSession(url, f"machine {n}", name="pair"), Path(folder) / str(n) / "chat"
            )
            for n in range(WRITERS)
        ]
        try:
            start = chats[0].t

            def send(chat: SharedChat) -> list[int]:
                return [chat.append("user", TEXT)[0] for _ in range(WRITER_APPENDS)]

            started = time.perf_counter()
            with ThreadPoolExecutor(WRITERS) as pool:
                ids = list(pool.map(send, chats))
            elapsed = time.perf_counter() - started
            for chat in chats:
                chat.follow()
            same = all(chat.core.saved() == chats[0].core.saved() for chat in chats)
        finally:
            for chat in chats:
                chat.close()
    everything = sorted(i for each in ids for i in each)
    dense = everything == list(range(start, start + WRITERS * WRITER_APPENDS))
    in_order = all(each == sorted(each) for each in ids)
    return WRITERS * WRITER_APPENDS / elapsed, dense and in_order and same


# 5. A distant database


@dataclass
class DelayRelay:
    """A TCP relay on 127.0.0.1 to the server's port: each chunk read from either side is
    written to the other `delay` seconds later, in order (chunks in flight overlap, as on a
    link with that latency). `up` counts the chunks from the client: one per round trip of
    a driver that waits for each answer."""

    target: int
    delay: float
    up: int = 0
    port: int = 0
    _loop: asyncio.AbstractEventLoop = field(default_factory=asyncio.new_event_loop)
    _thread: threading.Thread | None = None
    _server: asyncio.Server | None = None
    _relays: set[asyncio.Task[None]] = field(default_factory=set)

    def start(self) -> int:
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._thread.start()
        listening = asyncio.start_server(self._relay, "127.0.0.1", 0)
        self._server = asyncio.run_coroutine_threadsafe(listening, self._loop).result()
        self.port = int(self._server.sockets[0].getsockname()[1])
        return self.port

    def stop(self) -> None:
        """Let the connections still open finish (their client closed them), then end."""
        if self._thread is None:
            return
        asyncio.run_coroutine_threadsafe(self._close(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(5)
        self._loop.close()

    async def _close(self) -> None:
        if self._server is not None:
            self._server.close()
        if self._relays:
            _, pending = await asyncio.wait(self._relays, timeout=2)
            for task in pending:
                task.cancel()
            await asyncio.gather(*pending, return_exceptions=True)

    async def _relay(self, client: asyncio.StreamReader, back: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._relays.add(task)
        try:
            server, forth = await asyncio.open_connection("127.0.0.1", self.target)
            await asyncio.gather(self._pipe(client, forth, True), self._pipe(server, back, False))
        except OSError:
            pass
        finally:
            back.close()
            self._relays.discard(task)

    async def _pipe(
        self, source: asyncio.StreamReader, sink: asyncio.StreamWriter, up: bool
    ) -> None:
        loop = asyncio.get_running_loop()
        queue: asyncio.Queue[tuple[float, bytes]] = asyncio.Queue()

        async def deliver() -> None:
            while True:
                due, data = await queue.get()
                await asyncio.sleep(max(0.0, due - loop.time()))
                if not data:
                    break
                sink.write(data)
                await sink.drain()
            sink.close()

        delivering = asyncio.create_task(deliver())
        try:
            while data := await source.read(65536):
                self.up += up
                queue.put_nowait((loop.time() + self.delay, data))
        except OSError:
            pass
        queue.put_nowait((loop.time() + self.delay, b""))
        with contextlib.suppress(OSError):
            await delivering


@dataclass(frozen=True)
class Distant:
    append: float
    trips: float
    views: float
    turn: float
    shared_turn: float
    shared_trips: float


def distant(server: PgServer, database: str) -> Distant:
    relay = DelayRelay(server.port, DELAY)
    relay.start()
    try:
        url = server.url(database, ROLE).replace(f":{server.port}/", f":{relay.port}/")
        with connect(url, timeout=30) as conn:
            chat = PgChat.open(conn, "distant", machine="bench")
            times, trips = [], []
            for _ in range(DISTANT_APPENDS):
                before, started = relay.up, time.perf_counter()
                chat.append_message("user", TEXT)
                times.append(time.perf_counter() - started)
                trips.append(relay.up - before)
            core = MemoryCore()
            saves, turns = [], []
            for _ in range(DISTANT_TURNS):
                started = time.perf_counter()
                for _ in range(TURN_APPENDS):
                    chat.append_message("user", TEXT)
                    core.append("user", TEXT)
                saving = time.perf_counter()
                chat.save_views(core.saved())
                ended = time.perf_counter()
                saves.append(ended - saving)
                turns.append(ended - started)
        shared, shared_trips = shared_turns(url, relay)
    finally:
        relay.stop()
    return Distant(
        statistics.median(times),
        statistics.median(trips),
        statistics.median(saves),
        statistics.median(turns),
        shared,
        shared_trips,
    )


def shared_turns(url: str, relay: DelayRelay) -> tuple[float, float]:
    """A turn as a service runs it on a shared chat: the message's check of the database and
    fold, the chat's turn lock taken, the message, a tool's call and result and the reply
    logged (each folded back from the feed), the lock given back; the median time and round
    trips."""
    with tempfile.TemporaryDirectory() as folder:
        session = PgSession(url, "bench", name="shared")
        chat = SharedChat.open_shared(session, Path(folder) / "chat")
        lock = TurnLock(lambda: connect(url, timeout=30), chat.shared.chat_id, "bench")
        try:
            times, trips = [], []
            for _ in range(DISTANT_TURNS):
                before, started = relay.up, time.perf_counter()
                chat.follow()
                assert lock.try_take()
                for kind in ("user", "tool", "echo", "ever"):
                    chat.append(kind, TEXT)
                lock.release()
                times.append(time.perf_counter() - started)
                trips.append(relay.up - before)
        finally:
            lock.close()
            chat.close()
    return statistics.median(times), statistics.median(trips)


# The whole run


@dataclass(frozen=True)
class Skipped:
    why: str

    def lines(self) -> list[str]:
        return [f"postgresql store: skipped, {self.why}"]


@dataclass(frozen=True)
class Result:
    database: Appends
    files: Appends
    zooms: list[float]
    messages: int
    nodes: int
    fill_s: float
    opens: list[float]
    view_lines: int
    pair_per_s: float
    dense: bool
    far: Distant

    def lines(self) -> list[str]:
        db, files, far = self.database, self.files, self.far
        dense = "dense and in order, the same views" if self.dense else "NOT dense or not alike"
        estimate = TURN_APPENDS * far.append + far.views
        return [
            f"postgresql append: median {ms(db.median)}, p99 {ms(p99(db.times))} over "
            f"{LATENCY_APPENDS} synchronous commits, fsync on (file store: median "
            f"{ms(files.median)}, p99 {ms(p99(files.times))}, each fsynced)",
            f"postgresql append throughput: {db.per_s:,.0f} messages/s, {THROUGHPUT_APPENDS:,} "
            f"one at a time (file store: {files.per_s:,.0f} messages/s)",
            f"postgresql zoom (two children and a message): median "
            f"{ms(statistics.median(self.zooms))}, p99 {ms(p99(self.zooms))} "
            f"(target under 10 ms)",
            f"postgresql open of a {self.messages:,}-message chat ({self.nodes:,} nodes, "
            f"copied in {self.fill_s:.0f} s), as a service opens it: a view of "
            f"{self.view_lines} lines, median {ms(statistics.median(self.opens))}, "
            f"first {ms(self.opens[0])} (target under 1 s)",
            f"postgresql two machines' chats appending at once: {self.pair_per_s:,.0f} "
            f"messages/s in all, {WRITERS} x {WRITER_APPENDS:,}; ids {dense}",
            f"postgresql {DELAY * 1e3:.0f} ms away each way: append median {ms(far.append)} "
            f"({far.trips:.0f} round trips), save of the views {ms(far.views)}; a turn of "
            f"{TURN_APPENDS} appends and a save: {ms(estimate)} estimated, "
            f"{ms(far.turn)} measured; a turn of a shared chat as a service runs it (fold, turn "
            f"lock, 4 messages each folded back, lock given back): {ms(far.shared_turn)}, "
            f"{far.shared_trips:.0f} round trips",
        ]


def run() -> Result | Skipped:
    why = missing()
    if why is not None:
        return Skipped(why)
    with durable_server() as server:
        # the schema is made by the database's owner; a person's role may not make it
        connect(server.create_database("bench")).close()
        server.create_role(ROLE)
        url = server.url("bench", ROLE)
        with connect(url) as conn:
            mine = database_appends(conn)
        files = file_appends()
        with connect(url) as conn:
            long = fill(conn, FILL_SECONDS)
            zooms = zoom_times(long)
        opens, lines = open_times(url)
        pair_per_s, dense = two_writers(url)
        far = distant(server, "bench")
    return Result(
        mine,
        files,
        zooms,
        long.core.t,
        long.nodes,
        long.seconds,
        opens,
        lines,
        pair_per_s,
        dense,
        far,
    )


def main() -> int:
    for line in run().lines():
        print(line, flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
