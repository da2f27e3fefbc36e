"""A chat shared through a database when things go wrong: a machine's service killed with
SIGKILL mid-compaction or mid-turn, and the database stopped and started again under running
services."""

from __future__ import annotations

import os
import signal
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from agent.test_turn_support import is_compaction, is_turn, write_config
from evertalk.client.connection import Connection, RequestFailed, connect
from evertalk.pgstore.connect import connect as db_connect
from evertalk.protocol import requests
from evertalk.protocol.replies import Accepted, Appended
from fakes import AnthropicFake, Call, Script, serve, slow, summarizer
from fakes import chat as answer
from fakes.behaviours import Outcome
from pg_server import PgServer
from polling import wait_until
from served_home import run, start
from service.test_service_socket import gone, service_pid

pytestmark = pytest.mark.slow

SUMMARY = summarizer(120)


class Summaries:
    """Compactions answered at once, or held (30 s, longer than any test waits) while
    `holding` is set."""

    def __init__(self) -> None:
        self.holding = threading.Event()

    def __call__(self, call: Call) -> Outcome:
        return slow(30, SUMMARY)(call) if self.holding.is_set() else SUMMARY(call)


@pytest.fixture
def summaries() -> Summaries:
    return Summaries()


@pytest.fixture
def script(summaries: Summaries) -> Script:
    return Script().route(is_compaction, summaries)


def make_homes(tmp_path: Path, url: str, db_url: str) -> tuple[Path, Path]:
    pair = (tmp_path / "home", tmp_path / "office")
    store = ["", "[store]", f'url = "{db_url}"', "lease_seconds = 3"]
    for home in pair:
        write_config(home, base_url=url, settle=0, more=store)
    return pair


@pytest.fixture
def homes(tmp_path: Path, pg_url: str, script: Script) -> Iterator[tuple[Path, Path]]:
    with serve(AnthropicFake(script).app) as url:
        pair = make_homes(tmp_path, url, pg_url)
        try:
            yield pair
        finally:
            for home in pair:
                run(home, "service", "stop", timeout=120)


def append(conn: Connection, n: int) -> list[int]:
    text = f"message {n}: " + "words that a line sums up " * 40
    message = requests.OutsideMessage(kind="user", text=text, key=f"k{n}")
    return conn.request(requests.Append(messages=[message]), Appended).ids


def scalar(url: str, query: str) -> int:
    with db_connect(url) as db:
        row = db.execute(query).fetchone()
    assert row is not None
    return int(row[0])


def leaves_built(url: str) -> int:
    return scalar(url, "SELECT count(*) FROM evertalk.nodes WHERE l = 0")


def test_a_machine_killed_mid_compaction_leaves_its_nodes_to_the_other(
    homes: tuple[Path, Path], pg_url: str, summaries: Summaries
) -> None:
    home, office = homes
    summaries.holding.set()
    with connect(home, "capture", start=True) as conn:
        for n in range(4):
            assert append(conn, n) == [n]
    leased = "SELECT count(*) FROM evertalk.leases WHERE expires > now()"
    wait_until(lambda: scalar(pg_url, leased) >= 1, "home's compactor holds leases")
    pid = service_pid(home)
    os.kill(pid, signal.SIGKILL)
    wait_until(lambda: gone(pid), "home's service is gone")
    summaries.holding.clear()
    with connect(office, "capture", start=True) as conn:
        assert append(conn, 4) == [4]  # the other machine goes on
        # once home's leases lapse, office builds what home had taken
        wait_until(lambda: leaves_built(pg_url) == 5, "every leaf built", timeout=60)
    assert scalar(pg_url, "SELECT refused FROM evertalk.chats") == 0
    assert scalar(pg_url, "SELECT count(*) FROM evertalk.messages") == 5


def test_a_machine_killed_mid_turn_loses_nothing_and_the_other_goes_on(
    homes: tuple[Path, Path], pg_url: str, script: Script
) -> None:
    home, office = homes
    script.push(slow(30, answer("never seen")), answer("answered after the crash"))
    script.push(answer("office goes on"))
    assert run(home, "serve").returncode == 0
    pid = service_pid(home)
    asked = start(home, "-p", "are you there?")
    try:
        wait_until(lambda: any(is_turn(call) for call in script.calls), "the turn's call")
        os.kill(pid, signal.SIGKILL)
        out, err = asked.communicate(timeout=90)
    finally:
        if asked.poll() is None:
            asked.kill()
    assert asked.returncode == 0, err
    assert out == "answered after the crash\n"
    office_p = run(office, "-p", "and from the office?", timeout=90)
    assert office_p.returncode == 0, office_p.stderr
    assert office_p.stdout == "office goes on\n"
    with db_connect(pg_url) as db:
        rows = db.execute("SELECT kind, text FROM evertalk.messages ORDER BY id").fetchall()
    assert rows == [
        ("user", "are you there?"),
        ("ever", "answered after the crash"),
        ("user", "and from the office?"),
        ("ever", "office goes on"),
    ]


def test_the_database_stopped_and_started_again(
    tmp_path: Path, own_server: PgServer, script: Script
) -> None:
    db_url = own_server.create_database("shared")
    with serve(AnthropicFake(script).app) as url:
        home, office = make_homes(tmp_path, url, db_url)
        try:
            with connect(home, "capture", start=True) as conn:
                assert append(conn, 0) == [0]
                own_server.shut_down()
                with pytest.raises(RequestFailed) as refused:
                    append(conn, 1)
                line = str(refused.value)
                assert "\n" not in line and "database" in line, line
                # a window's message is refused in one line (it keeps it), `-p` fails clearly
                with pytest.raises(RequestFailed) as unsent:
                    conn.request(requests.Send(text="hello?", key="s1"), Accepted)
                assert "\n" not in str(unsent.value) and "database" in str(unsent.value)
                asked = run(home, "-p", "anyone?")
                assert asked.returncode != 0 and asked.stdout == ""
                assert asked.stderr.count("\n") == 1 and "database" in asked.stderr, asked.stderr
                own_server.start_again()
                # the service connects again by itself, and the message goes in once
                wait_until(lambda: _appended(conn, 1), "the message is taken again", timeout=60)
            with connect(office, "capture", start=True) as conn:
                assert append(conn, 2) == [2]
            ids = "SELECT count(*) FROM evertalk.messages"
            assert scalar(db_url, ids) == 3
        finally:
            for each in (home, office):
                run(each, "service", "stop", timeout=120)


def _appended(conn: Connection, n: int) -> bool:
    try:
        return append(conn, n) == [n]
    except RequestFailed:
        return False


def test_p_with_the_database_down_from_the_start_fails_in_one_line(tmp_path: Path) -> None:
    home = tmp_path / "home"
    with socket.socket() as probe:  # a port held, never listened on: no other test takes it
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
        url = f"postgresql://me:pw-never-shown-4821@127.0.0.1:{port}/chat"
        write_config(home, more=["", "[store]", f'url = "{url}"'])
        asked = run(home, "-p", "hello?")
    assert asked.returncode == 1 and asked.stdout == ""
    assert asked.stderr.count("\n") == 1, asked.stderr
    assert f"the database at 127.0.0.1:{port}/chat cannot be reached" in asked.stderr
    assert "tries again" not in asked.stderr  # nothing does: the service did not start
    assert "pw-never-shown-4821" not in asked.stderr + (home / "service.log").read_text()
