"""Two services, two homes, one chat in one database: what each window is told, what each
machine logs and builds, as `evertalk serve` runs for real on both."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.test_turn_support import is_compaction, is_turn, write_config
from evertalk.client.connection import Connection, ServiceGone, connect
from evertalk.pgstore.connect import connect as db_connect
from evertalk.protocol import events, replies, requests
from fakes import AnthropicFake, Script, serve, slow, summarizer
from fakes import chat as answer
from polling import wait_until
from served_home import run, start

pytestmark = pytest.mark.slow

COUNT = 200


@pytest.fixture
def script() -> Script:
    return Script().route(is_compaction, summarizer(120))


@pytest.fixture
def homes(tmp_path: Path, pg_url: str, script: Script) -> Iterator[tuple[Path, Path]]:
    fake = AnthropicFake(script)
    with serve(fake.app) as url:
        pair = (tmp_path / "home", tmp_path / "office")
        for home in pair:
            write_config(home, base_url=url, more=["", "[store]", f'url = "{pg_url}"'])
        try:
            yield pair
        finally:
            for home in pair:
                run(home, "service", "stop", timeout=120)


class Window:
    """A client that only listens: the rows a window would show, from `recorded` events."""

    def __init__(self, home: Path) -> None:
        self.conn = connect(home, "window", start=True)
        self.texts: list[str] = []
        self.count = 0
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        try:
            while True:
                frame = self.conn.receive()
                if isinstance(frame, events.Recorded):
                    self.count += frame.count
                    if frame.text is not None:
                        self.texts.append(frame.text)
        except ServiceGone:
            return

    def close(self) -> None:
        self.conn.close()


def send(conn: Connection, text: str, key: str) -> list[int]:
    message = requests.OutsideMessage(kind="user", text=text, key=key)
    return conn.request(requests.Append(messages=[message]), replies.Appended).ids


def text_of(n: int) -> str:
    # long enough that each leaf needs a model's line (a short message is its own summary)
    return f"message {n} from {'home' if n % 2 == 0 else 'office'}: " + "detail words " * 60


def test_two_services_share_one_chat(homes: tuple[Path, Path], pg_url: str, script: Script) -> None:
    windows = [Window(home) for home in homes]
    senders = [connect(home, "capture", start=True) for home in homes]
    db = db_connect(pg_url)
    most_leases = 0
    try:
        for n in range(COUNT):
            assert send(senders[n % 2], text_of(n), f"k{n}") == [n]
            most_leases = max(most_leases, live_leases(db))
        wait_until(lambda: all(w.count >= COUNT for w in windows), "both windows", 60)
        for window in windows:
            assert window.count == COUNT
            assert sorted(window.texts) == sorted(text_of(n) for n in range(COUNT))

        def built() -> bool:
            nonlocal most_leases
            most_leases = max(most_leases, live_leases(db))
            return unbuilt_leaves(db) == 0 and live_leases(db) == 0

        wait_until(built, "every leaf built, no lease left", 120)
        counts = quiet_counts(db, script)
    finally:
        for conn in [*senders, *(w.conn for w in windows)]:
            conn.close()
    ids = [row[0] for row in db.execute("SELECT id FROM evertalk.messages ORDER BY id")]
    assert ids == list(range(COUNT))
    texts = [row[0] for row in db.execute("SELECT text FROM evertalk.messages ORDER BY id")]
    assert texts == [text_of(n) for n in range(COUNT)]
    refused = db.execute("SELECT refused FROM evertalk.chats").fetchone()
    assert refused == (0,)
    made, calls = counts
    assert made == calls  # every node built by one call, once
    kept = db.execute("SELECT count(*), count(DISTINCT row->>'machine') FROM evertalk.ledger")
    assert kept.fetchone() == (calls, 2)  # every billed call in the chat's ledger, by machine
    builders = db.execute("SELECT DISTINCT machine FROM evertalk.changes WHERE what ? 'nodes'")
    assert len(builders.fetchall()) == 2  # both compactors took part
    assert most_leases <= 8
    db.close()


def quiet_counts(db: object, script: Script) -> tuple[int, int]:
    """Nodes built and compaction calls made, once both have held still for two seconds: the
    summaries above the leaves go on a while after the leaves are built."""
    seen: list[tuple[float, tuple[int, int]]] = []

    def still() -> bool:
        row = db.execute("SELECT count(*) FROM evertalk.nodes WHERE flag = 1").fetchone()  # type: ignore[attr-defined]
        now = (int(row[0]), sum(1 for call in script.calls if is_compaction(call)))
        if not seen or seen[-1][1] != now:
            seen.append((time.monotonic(), now))
        return now[0] == now[1] and time.monotonic() - seen[-1][0] >= 2.0

    wait_until(still, "the summaries all landed", 120)
    return seen[-1][1]


def live_leases(db: object) -> int:
    row = db.execute("SELECT count(*) FROM evertalk.leases WHERE expires > now()").fetchone()  # type: ignore[attr-defined]
    return int(row[0])


def unbuilt_leaves(db: object) -> int:
    row = db.execute(  # type: ignore[attr-defined]
        "SELECT c.count - (SELECT count(*) FROM evertalk.nodes n WHERE n.chat = c.id AND n.l = 0)"
        " FROM evertalk.chats c"
    ).fetchone()
    return int(row[0])


def test_a_message_from_another_machine_waits_for_the_running_turn(
    homes: tuple[Path, Path], pg_url: str, script: Script
) -> None:
    home, office = homes
    script.push(slow(4, answer("home's answer")), answer("office's answer"))
    first = start(home, "-p", "a long question")
    try:
        wait_until(lambda: any(is_turn(call) for call in script.calls), "home's turn call")
        second = run(office, "-p", "a short one", timeout=120)
        out, err = first.communicate(timeout=120)
    finally:
        if first.poll() is None:
            first.kill()
    assert (first.returncode, out) == (0, "home's answer\n"), err
    assert (second.returncode, second.stdout) == (0, "office's answer\n"), second.stderr
    with db_connect(pg_url) as db:
        rows = db.execute("SELECT kind, text FROM evertalk.messages ORDER BY id").fetchall()
    # office's turn started once home's had ended: its message is logged after home's answer
    assert rows == [
        ("user", "a long question"),
        ("ever", "home's answer"),
        ("user", "a short one"),
        ("ever", "office's answer"),
    ]
