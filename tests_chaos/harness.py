"""The checker: several machines on one real PostgreSQL, a random schedule of work and faults, and
the laws every copy of the chat must keep afterwards (no tests of its own: `make chaos` runs
test_chaos.py on many seeds and prints a table; it is not part of `make test` while the
violations it finds are open).

Three machines are three homes whose services (`evertalk serve`, for real) share one chat
through a `Proxy` in front of the database, each followed by a window (a client that listens
and reconnects). A schedule, drawn from a seed, mixes notes appended on any machine, turns run
with `-p`, and faults: kill -9 of a service, the database killed and started again (it recovers
from its write-ahead log), every database connection cut, the network stalled for a while.
Then the faults heal, every note that was not acknowledged is sent again under its key, the
summaries are left to finish, and the laws are checked:

- every acknowledged note is logged once, and the ids are dense;
- no two turns interleave: the records of one turn (by the epoch its appends name) stand together;
- every machine's service renders the same view, and so does a machine that opens only now;
- every window shows every note, once;
- nothing is left unbuilt or leased.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from proxy import Proxy

from agent.test_turn_support import is_compaction, write_config
from evertalk.client.connection import Connection, ServiceError, ServiceGone, connect
from evertalk.pgstore.connect import connect as db_connect
from evertalk.protocol import replies, requests
from fakes import AnthropicFake, Script, serve, summarizer
from fakes import chat as answer
from pg_server import PgServer
from served_home import run, start

NAMES = ("home", "office", "laptop")
KINDS = ("note", "note", "note", "note", "turn", "kill", "db", "cut", "stall", "pause")
"""What a step of a schedule may be, as often as it is listed."""


@dataclass(frozen=True)
class Step:
    kind: str
    machine: int = 0
    n: int = 0  # the note's or turn's number
    seconds: float = 0.0


def schedule(
    seed: int, steps: int, kinds: tuple[str, ...] = KINDS, machines: int = len(NAMES)
) -> list[Step]:
    """The steps a seed draws: the same seed, the same schedule."""
    rng = random.Random(seed)
    drawn: list[Step] = []
    for n in range(steps):
        kind = rng.choice(kinds)
        drawn.append(Step(kind, rng.randrange(machines), n, round(rng.uniform(0.2, 1.5), 2)))
    return drawn


def note_text(n: int) -> str:
    return f"note {n}: " + "words a summary line takes in " * 30


def turn_text(n: int) -> str:
    return f"turn {n}: please answer"


class Window:
    """A client that follows the log as a window does (its position in the hello, what it
    missed, then each new stretch) and connects again when its service goes: the messages it
    shows, by id."""

    def __init__(self, home: Path) -> None:
        self.home = home
        self.shown: dict[int, str] = {}
        self.position = 0
        self.edits: int | None = None  # the in-place changes applied (forgets, repairs)
        self.reconnects = 0
        self.trace: list[str] = []  # the frames of the log it got, for a violation's report
        self._stop = threading.Event()
        self._conn: Connection | None = None
        self._thread = threading.Thread(target=self._follow, daemon=True)
        self._thread.start()

    def _follow(self) -> None:
        while not self._stop.is_set():
            try:
                self._conn = connect(
                    self.home, "window", start=True, since=self.position, edits=self.edits
                )
                while True:
                    frame = self._conn.receive()
                    if isinstance(frame, replies.Logged | replies.Changed):
                        self.shown.update({r.id: r.text for r in frame.records})
                        self.trace.append(_traced(frame))
                    if isinstance(frame, replies.Logged):
                        self.position = max(self.position, frame.t)
                    if isinstance(frame, replies.Missed | replies.Changed):
                        self.edits = frame.edits  # only once what it names is applied
            except (ServiceGone, ServiceError, OSError):
                if self._stop.wait(0.3):
                    return
                self.reconnects += 1

    def close(self) -> None:
        self._stop.set()
        if self._conn is not None:
            with contextlib.suppress(Exception):
                self._conn.close()


def _traced(frame: replies.Logged | replies.Changed) -> str:
    ids = [r.id for r in frame.records]
    if isinstance(frame, replies.Logged):
        return f"{type(frame).__name__.lower()} {frame.first}-{frame.t} {ids}"
    return f"changed {ids}"


@dataclass
class Machine:
    name: str
    home: Path
    window: Window | None = None

    def pid(self) -> int | None:
        status = run(self.home, "service", "status", "--json", timeout=60)
        found = json.loads(status.stdout or "{}")
        return int(found["pid"]) if found.get("running") else None

    def append(self, n: int, timeout: float = 20) -> bool:
        """Send note `n` under its key; whether the service acknowledged it."""
        message = requests.OutsideMessage(kind="user", text=note_text(n), key=f"note-{n}")
        result: list[bool] = []

        def go() -> None:
            try:
                with connect(self.home, "capture", start=True) as conn:
                    conn.request(requests.Append(messages=[message]), replies.Appended)
                result.append(True)
            except Exception:  # refused, gone, unreachable: not acknowledged
                result.append(False)

        thread = threading.Thread(target=go, daemon=True)
        thread.start()
        thread.join(timeout)
        return bool(result and result[0])

    def view(self) -> str | None:
        try:
            with connect(self.home, "view", start=True) as conn:
                return conn.request(requests.GetView(), replies.View).text
        except Exception:
            return None


@dataclass
class Report:
    seed: int
    faults: Counter[str] = field(default_factory=Counter)
    violations: list[str] = field(default_factory=list)
    notes: int = 0
    turns: int = 0
    seconds: float = 0.0


class Cluster:
    """The machines, the database behind its proxy, and the model's fake, for one schedule."""

    def __init__(self, root: Path, server: PgServer, database_url: str, model_url: str) -> None:
        self.server = server
        self.url = database_url
        self.proxy = Proxy(server.port)
        self.model_url = model_url
        self.machines = [self._machine(root, name) for name in NAMES]
        self.turns: list[subprocess.Popen[str]] = []

    def _machine(self, root: Path, name: str) -> Machine:
        home = root / name
        store = ["", "[store]", f'url = "{self.proxy.url(self.url)}"', "lease_seconds = 3"]
        write_config(home, base_url=self.model_url, settle=0, more=store)
        return Machine(name, home)

    def close(self) -> None:
        for machine in self.machines:
            if machine.window is not None:
                machine.window.close()
        for process in self.turns:
            if process.poll() is None:
                process.kill()
        self.proxy.heal()
        if not self.server.running():
            self.server.start_again()
        for machine in self.machines:
            run(machine.home, "service", "stop", timeout=120)
        self.proxy.close()


def apply(cluster: Cluster, step: Step, report: Report, acked: set[int]) -> None:
    machine = cluster.machines[step.machine]
    if step.kind == "note":
        report.notes += 1
        if machine.append(step.n):
            acked.add(step.n)
    elif step.kind == "turn":
        report.turns += 1
        cluster.turns.append(start(machine.home, "-p", turn_text(step.n)))
    elif step.kind == "kill":
        pid = machine.pid()
        if pid is not None:
            os.kill(pid, signal.SIGKILL)
            report.faults["kill -9 of a service"] += 1
    elif step.kind == "db":
        if cluster.server.running():
            cluster.server.kill()
            report.faults["database killed"] += 1
            time.sleep(step.seconds)
            cluster.server.start_again()
    elif step.kind == "cut":
        report.faults["connections cut"] += 1
        cluster.proxy.cut()
    elif step.kind == "stall":
        report.faults["network stalled"] += 1
        cluster.proxy.stall()
        time.sleep(step.seconds)
        cluster.proxy.heal()
    else:
        time.sleep(step.seconds)


def quiesce(cluster: Cluster, steps: list[Step], acked: set[int], report: Report) -> set[int]:
    """Heal every fault and send again each note not acknowledged; the notes sent."""
    cluster.proxy.heal()
    if not cluster.server.running():
        cluster.server.start_again()
    sent = {step.n for step in steps if step.kind == "note"}
    for n in sorted(sent - acked):
        for machine in cluster.machines:
            if machine.append(n, timeout=60):
                acked.add(n)
                break
        else:
            report.violations.append(f"note {n} was never acknowledged after the faults healed")
    for process in cluster.turns:
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=120)
    return acked


def scalar(url: str, query: str) -> int:
    with db_connect(url) as db:
        row = db.execute(query).fetchone()
    return int(row[0]) if row is not None else 0


def settled(url: str) -> bool:
    leaves = "SELECT count(*) FROM evertalk.nodes WHERE l = 0"
    unbuilt = f"SELECT (SELECT count FROM evertalk.chats) - ({leaves})"
    leased = "SELECT count(*) FROM evertalk.leases WHERE expires > now()"
    return scalar(url, unbuilt) == 0 and scalar(url, leased) == 0


def wait_for(condition: Callable[[], bool], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.2)
    return condition()


def check(cluster: Cluster, acked: set[int], report: Report, late: Machine) -> None:
    url = cluster.url
    if not wait_for(lambda: settled(url), 120):
        report.violations.append("summaries still unbuilt or leased two minutes after the faults")
    with db_connect(url) as db:
        rows = db.execute(
            "SELECT id, kind, text, key FROM evertalk.messages ORDER BY id"
        ).fetchall()
        appends = db.execute(
            "SELECT machine, what FROM evertalk.changes WHERE what ? 'append' ORDER BY seq"
        ).fetchall()
    ids = [row[0] for row in rows]
    if ids != list(range(len(ids))):
        report.violations.append(f"the ids are not dense: {ids[:5]}…")
    keys = Counter(row[3] for row in rows if row[3] and row[3].startswith("note-"))
    for n in sorted(acked):
        if keys[f"note-{n}"] != 1:
            report.violations.append(f"note {n} is logged {keys[f'note-{n}']} times")
    report.violations += interleaved(rows, appends)
    views: dict[str, str | None] = {}

    def same_views() -> bool:  # a machine folds the others' last changes a moment later
        views.update({m.name: m.view() for m in [*cluster.machines, late]})
        return None not in views.values() and len(set(views.values())) == 1

    if not wait_for(same_views, 30):
        sizes = {name: None if v is None else len(v) for name, v in views.items()}
        report.violations.append(f"the machines render different views: {sizes}")
    notes = sorted(note_text(n) for n in acked)
    texts = {int(row[0]): str(row[2]) for row in rows}  # type: ignore[call-overload]

    def windows_agree() -> bool:  # a window hears the last changes a moment later
        with db_connect(url) as db:
            found = db.execute("SELECT id, text FROM evertalk.messages ORDER BY id").fetchall()
        texts.clear()
        texts.update({int(i): str(text) for i, text in found})
        return all(m.window is not None and m.window.shown == texts for m in cluster.machines)

    wait_for(windows_agree, 30)
    for machine in cluster.machines:
        window = machine.window
        assert window is not None
        shown = sorted(text for text in window.shown.values() if text.startswith("note "))
        if shown != notes:
            missing, doubled = len(set(notes) - set(shown)), len(shown) - len(set(shown))
            report.violations.append(
                f"{machine.name}'s window shows {len(set(shown))} of {len(notes)} notes "
                f"({missing} missing, {doubled} twice, {window.reconnects} reconnects)"
            )
        if window.shown != texts:
            missing_ids = sorted(set(texts) - set(window.shown))
            extra = sorted(set(window.shown) - set(texts))
            other = sorted(i for i in set(texts) & set(window.shown) if texts[i] != window.shown[i])
            report.violations.append(
                f"{machine.name}'s window differs from the log: missing {missing_ids[:8]}, "
                f"not in the log {extra[:8]}, other text {other[:8]} (log of {len(texts)}); "
                f"it got: {'; '.join(window.trace)[-600:]}"
            )


def interleaved(rows: list[tuple[object, ...]], appends: list[tuple[object, ...]]) -> list[str]:
    """Turns whose records are mixed. Each turn's appends name the epoch of the turn lock it
    took; the records of one epoch must stand together, with no other turn's between its
    first and its last (notes from outside any turn may), and every turn's message must be
    logged by a turn. A turn cut short (its service killed, its lock lost) ends early, and
    the message it left is answered by a later turn of its own: neither mixes two turns."""
    epoch_of: dict[int, int] = {}
    for _, what in appends:
        epoch = what.get("epoch")  # type: ignore[attr-defined]
        first, count = (int(x) for x in what["append"])  # type: ignore[index]
        if epoch is not None:
            epoch_of.update({i: int(epoch) for i in range(first, first + count)})
    spans: dict[int, list[int]] = {}
    for i, epoch in sorted(epoch_of.items()):
        spans.setdefault(epoch, [i, i])[1] = i
    found = [
        f"turn {epoch} (messages {lo}-{hi}) has turn {sorted(inside)[0]}'s records inside"
        for epoch, (lo, hi) in sorted(spans.items())
        if (inside := {epoch_of[i] for i in range(lo, hi + 1) if i in epoch_of} - {epoch})
    ]
    found += [
        f"message {i} ({str(text)[:12]}) was logged outside any turn"
        for i, _, text, _ in rows
        if str(text).startswith("turn ") and int(i) not in epoch_of  # type: ignore[call-overload]
    ]
    return found


@contextlib.contextmanager
def cluster_for(root: Path, server: PgServer, database_url: str) -> Iterator[Cluster]:
    script = Script().route(is_compaction, summarizer(120))
    script.route(lambda call: not is_compaction(call), answer("ok"))
    with serve(AnthropicFake(script).app) as model_url:
        cluster = Cluster(root, server, database_url, model_url)
        try:
            yield cluster
        finally:
            cluster.close()


def run_schedule(root: Path, server: PgServer, database_url: str, seed: int, steps: int) -> Report:
    """Run the seed's schedule on a new cluster and check it; what was done and found."""
    began = time.monotonic()
    report = Report(seed)
    drawn = schedule(seed, steps)
    with cluster_for(root, server, database_url) as cluster:
        for machine in cluster.machines:
            machine.window = Window(machine.home)
        acked: set[int] = set()
        for step in drawn:
            apply(cluster, step, report, acked)
        quiesce(cluster, drawn, acked, report)
        late = cluster._machine(root, "late")
        try:
            check(cluster, acked, report, late)
        finally:
            run(late.home, "service", "stop", timeout=120)
    report.seconds = time.monotonic() - began
    return report


def table(reports: list[Report]) -> str:
    """The checker's figures as a Markdown table."""
    faults: Counter[str] = Counter()
    for report in reports:
        faults.update(report.faults)
    lines = [
        "| seeds | notes | turns | " + " | ".join(sorted(faults)) + " | violations | seconds |",
        "|" + "---|" * (5 + len(faults)),
        f"| {len(reports)} | {sum(r.notes for r in reports)} | {sum(r.turns for r in reports)} | "
        + " | ".join(str(faults[k]) for k in sorted(faults))
        + f" | {sum(len(r.violations) for r in reports)} | {sum(r.seconds for r in reports):.0f} |",
    ]
    for report in reports:
        lines += [f"seed {report.seed}: {v}" for v in report.violations]
    return "\n".join(lines)
