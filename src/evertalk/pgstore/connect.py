"""A connection to the database, with the schema applied and commits synchronous."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TypeAlias
from urllib.parse import unquote, urlsplit

import psycopg

from evertalk import secret_env
from evertalk.pgstore.errors import PgStoreError
from evertalk.pgstore.schema import apply_schema
from evertalk.pgstore.url import parse_url

Connection: TypeAlias = "psycopg.Connection[tuple[Any, ...]]"


@contextmanager
def driver_errors(doing: str) -> Iterator[None]:
    """A driver's error as one line saying what could not be done."""
    try:
        yield
    except psycopg.Error as error:
        raise PgStoreError(f"cannot {doing}: {one_line(error)}") from None


def one_line(error: BaseException, url: str | None = None) -> str:
    """The first line of a driver's error, without the URL's password should it hold it."""
    lines = str(error).strip().splitlines()
    line = lines[0] if lines else type(error).__name__
    secret = _password(url) if url is not None else None
    return line.replace(secret, "***") if secret else line


def _password(url: str) -> str | None:
    try:
        password = urlsplit(url).password
    except ValueError:
        return None
    return unquote(password) if password else None


def _sealed_password(url: str) -> dict[str, Any]:
    """PGPASSWORD, which libpq would read from the environment, but which evertalk's processes
    keep out of it (`secret_env`), for a URL that carries no password of its own."""
    password = secret_env.kept("PGPASSWORD")
    if password is None or _password(url) is not None or "password=" in url:
        return {}
    return {"password": password}


KEEPALIVE_IDLE = 30
"""Seconds of silence before the client's TCP keepalives probe (every 10 s, 3 times): a database
whose machine or network went silent is noticed in about a minute, not when the system's TCP
gives up, hours later."""


def connect(url: str, *, timeout: int = 10) -> Connection:
    """An autocommit connection to the database at `url` whose schema is this code's (applied
    if missing). Every commit waits for the server's fsync (SPEC §1.3: nothing is acknowledged
    before it), whatever the server's default."""
    conn = open_connection(url, timeout=timeout)
    where = parse_url(url).where
    try:
        apply_schema(conn, where)
    except psycopg.Error as error:
        conn.close()
        raise PgStoreError(f"cannot use the database at {where}: {one_line(error, url)}") from None
    except BaseException:
        conn.close()
        raise
    return conn


def open_connection(url: str, *, timeout: int = 10) -> Connection:
    """`connect`'s connection before the schema is applied: for `evertalk store init`, which
    makes the schema for a role of its own."""
    where = parse_url(url).where
    try:
        conn = psycopg.connect(
            url,
            autocommit=True,
            connect_timeout=timeout,
            application_name="evertalk",
            keepalives=1,
            keepalives_idle=KEEPALIVE_IDLE,
            keepalives_interval=10,
            keepalives_count=3,
            **_sealed_password(url),
        )
    except psycopg.Error as error:
        reason = one_line(error, url)
        raise PgStoreError(f"cannot reach the database at {where}: {reason}") from None
    try:
        conn.execute("SET synchronous_commit = on")
    except psycopg.Error as error:
        conn.close()
        raise PgStoreError(f"cannot use the database at {where}: {one_line(error, url)}") from None
    except BaseException:
        conn.close()
        raise
    return conn
