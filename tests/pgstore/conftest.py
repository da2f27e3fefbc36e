"""A fresh database of the session's PostgreSQL server per test, and connections that close."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from uuid import uuid4

import pytest

from evertalk.pgstore.connect import Connection, connect
from pg_server import PgServer


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
