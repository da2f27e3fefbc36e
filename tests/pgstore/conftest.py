"""A fresh database of the session's PostgreSQL server per test, and connections that close."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from uuid import uuid4

import pytest

from evertalk.pgstore.connect import Connection, connect
from pg_server import PgServer, missing, start_server


@pytest.fixture
def pg_url(pg_server: PgServer) -> str:
    """The superuser's URL of a new empty database."""
    return pg_server.create_database(f"t_{uuid4().hex[:12]}")


@pytest.fixture
def pg_connect(pg_url: str) -> Iterator[Callable[..., Connection]]:
    """`pg_connect(url=pg_url)`: a connection with the schema applied, closed at the end."""
    opened: list[Connection] = []

    def open_one(url: str = pg_url) -> Connection:
        conn = connect(url)
        opened.append(conn)
        return conn

    yield open_one
    for conn in opened:
        conn.close()


@pytest.fixture
def own_server() -> Iterator[PgServer]:
    """A server of the test's own, to stop or kill."""
    why = missing()
    if why is not None:
        pytest.skip(why)
    server = start_server()
    yield server
    if not server.running():
        server.port = 0  # nothing to stop: `stop` only removes its folder
    server.stop()
