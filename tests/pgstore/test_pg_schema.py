"""The schema: applied once at connect, under a lock; a newer one refused with one line."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from uuid import uuid4

import psycopg
import pytest

from evertalk.pgstore.connect import Connection, connect
from evertalk.pgstore.errors import PgStoreError
from evertalk.pgstore.nodes import node_shape
from evertalk.pgstore.pgchat import PgChat
from evertalk.pgstore.schema import (
    KNOWN,
    MIGRATIONS,
    SCHEMA_LOCK,
    apply_schema,
    schema_version,
)
from pg_server import PgServer


def test_the_schema_is_applied_once(pg_connect: Callable[..., Connection]) -> None:
    conn = pg_connect()
    assert schema_version(conn) == KNOWN
    assert apply_schema(conn, "here") == 0
    assert conn.execute("SELECT count(*) FROM evertalk.version").fetchone() == (1,)
    pg_connect()  # a second machine finds it applied


def test_machines_connecting_at_once_to_a_new_database(pg_url: str) -> None:
    with ThreadPoolExecutor(4) as pool:
        conns = list(pool.map(lambda _: connect(pg_url), range(4)))
    try:
        assert [schema_version(conn) for conn in conns] == [KNOWN] * 4
    finally:
        for conn in conns:
            conn.close()


def test_a_newer_database_is_refused_in_one_line(
    pg_server: PgServer, pg_url: str, pg_connect: Callable[..., Connection]
) -> None:
    pg_connect().execute("UPDATE evertalk.version SET version = %s", (KNOWN + 1,))
    with pytest.raises(PgStoreError) as caught:
        connect(pg_url)
    database = pg_url.rpartition("/")[2]
    assert str(caught.value) == (
        f"the database at 127.0.0.1:{pg_server.port}/{database} is of schema version"
        f" {KNOWN + 1}; this evertalk knows up to {KNOWN}: upgrade evertalk"
    )


def test_an_unreachable_database_in_one_line_without_its_password(pg_server: PgServer) -> None:
    with pytest.raises(PgStoreError) as caught:
        connect(f"postgresql://postgres:hush-{pg_server.password}@127.0.0.1:1/x", timeout=2)
    message = str(caught.value)
    assert message.startswith("cannot reach the database at 127.0.0.1:1/x: ")
    assert "\n" not in message and "hush" not in message


def test_a_wrong_password_in_one_line(pg_server: PgServer) -> None:
    with pytest.raises(PgStoreError) as caught:
        connect(f"postgresql://postgres:wrong-one@127.0.0.1:{pg_server.port}/postgres")
    assert "password authentication failed" in str(caught.value)
    assert "wrong-one" not in str(caught.value) and "\n" not in str(caught.value)


def test_a_role_that_may_not_create_the_schema(pg_server: PgServer, pg_url: str) -> None:
    name = "nocreate_" + pg_url.rpartition("_")[2]
    pg_server.create_role(name)
    with pytest.raises(PgStoreError, match=r"cannot use the database at .*permission denied"):
        connect(pg_server.url(pg_url.rpartition("/")[2], name))


def test_commits_are_synchronous(pg_connect: Callable[..., Connection]) -> None:
    assert pg_connect().execute("SHOW synchronous_commit").fetchone() == ("on",)


def test_the_package_loads_no_driver() -> None:
    """What a file-store command may import of the package does not load psycopg."""
    code = (
        "import sys, evertalk.pgstore, evertalk.pgstore.url, evertalk.pgstore.errors;"
        "print('psycopg' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.stdout.strip() == "False", done.stderr
    assert psycopg.__version__ == "3.3.9"


def test_a_connection_probes_a_silent_database(pg_connect: Callable[..., Connection]) -> None:
    """A database gone silent (its machine off, a cable out) is found by TCP keepalives in
    about a minute, not when the system gives up on the socket hours later."""
    dsn = pg_connect().info.dsn
    assert "keepalives=1" in dsn and "keepalives_idle=30" in dsn, dsn
    assert "keepalives_interval=10" in dsn and "keepalives_count=3" in dsn


def test_a_database_of_version_1_gets_the_shape_of_its_nodes(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as old:
        old.execute("CREATE SCHEMA evertalk")
        old.execute(MIGRATIONS[0].encode("utf-8"))
        old.execute("INSERT INTO evertalk.version (version) VALUES (1)")
        old.execute("INSERT INTO evertalk.chats (name, count) VALUES ('main', 4)")
        old.execute(
            "INSERT INTO evertalk.nodes (chat, l, i, text, flag)"
            " SELECT id, 0, 1, 'été', 2 FROM evertalk.chats UNION ALL"
            " SELECT id, 1, 1, E'\\x01nul\\x01a\\\\0b', 1 FROM evertalk.chats"
        )
    conn = connect(pg_url)  # brings it to the current version
    try:
        assert schema_version(conn) == KNOWN
        row = conn.execute("SELECT id FROM evertalk.chats").fetchone()
        assert row is not None
        shape = node_shape(conn, row[0], 4)
        assert [list(level) for level in shape.flags] == [[0, 2, 0, 0], [0, 1], [0]]
        assert [list(level) for level in shape.sizes] == [[0, 5, 0, 0], [0, 3], [0]]
    finally:
        conn.close()


# Migrations by a role that row-level security holds (one role per person, no BYPASSRLS)

FLAGS = [[0, 2, 0, 0], [0, 1], [0]]
SIZES = [[0, 5, 0, 0], [0, 3], [0]]
"""The shape of the chat `chat_with_nodes` writes."""


def two_people(pg_server: PgServer, pg_url: str) -> tuple[str, str]:
    """The URLs of two new roles' in the test's database; the first may make the schema, and
    so owns it, as the first person to connect to a database of their own does."""
    database = pg_url.rpartition("/")[2]
    roles = [f"{name}_{uuid4().hex[:8]}" for name in ("ann", "bob")]
    for role in roles:
        pg_server.create_role(role)
    with psycopg.connect(pg_url, autocommit=True) as admin:
        admin.execute(f'GRANT CREATE ON DATABASE "{database}" TO "{roles[0]}"'.encode())
    return pg_server.url(database, roles[0]), pg_server.url(database, roles[1])


def old_database(url: str, version: int) -> None:
    """The schema at `version`, as an older evertalk run by the role of `url` left it."""
    with psycopg.connect(url, autocommit=True) as old:
        old.execute("CREATE SCHEMA evertalk")
        for migration in MIGRATIONS[:version]:
            old.execute(migration.encode("utf-8"))
        old.execute("INSERT INTO evertalk.version (version) VALUES (%s)", (version,))


def chat_with_nodes(url: str) -> int:
    """A chat of 4 messages with two nodes, written by an older evertalk as the role of `url`."""
    with psycopg.connect(url, autocommit=True) as old:
        row = old.execute(
            "INSERT INTO evertalk.chats (name, count) VALUES ('main', 4) RETURNING id"
        ).fetchone()
        assert row is not None
        old.execute(
            "INSERT INTO evertalk.nodes (chat, l, i, text, flag)"
            " VALUES (%(chat)s, 0, 1, 'été', 2), (%(chat)s, 1, 1, 'abc', 1)",
            {"chat": row[0]},
        )
        return int(row[0])


def assert_shaped(url: str, chat: int) -> None:
    conn = connect(url)
    try:
        shape = node_shape(conn, chat, 4)
        assert [list(level) for level in shape.flags] == FLAGS
        assert [list(level) for level in shape.sizes] == SIZES
    finally:
        conn.close()


def test_a_migration_run_by_a_role_held_to_row_security_shapes_every_chat(
    pg_server: PgServer, pg_url: str
) -> None:
    ann, bob = two_people(pg_server, pg_url)
    old_database(ann, 1)
    chats = chat_with_nodes(ann), chat_with_nodes(bob)
    connect(ann).close()  # ann owns the schema: her evertalk brings it up to date
    assert_shaped(ann, chats[0])
    assert_shaped(bob, chats[1])  # though ann's role cannot see bob's rows


def test_a_database_whose_migration_missed_the_others_shapes_is_repaired(
    pg_server: PgServer, pg_url: str
) -> None:
    ann, bob = two_people(pg_server, pg_url)
    old_database(ann, 3)
    chats = chat_with_nodes(ann), chat_with_nodes(bob)
    with psycopg.connect(pg_url, autocommit=True) as admin:  # as migration 2 run by ann left it
        admin.execute("DELETE FROM evertalk.shape WHERE chat = %s", (chats[1],))
    connect(ann).close()
    assert_shaped(ann, chats[0])
    assert_shaped(bob, chats[1])


def test_a_role_that_may_not_bring_the_schema_up_to_date_says_who_may(
    pg_server: PgServer, pg_url: str
) -> None:
    ann, bob = two_people(pg_server, pg_url)
    old_database(ann, 1)
    with pytest.raises(PgStoreError) as caught:
        connect(bob)
    owner = ann.split("//")[1].split(":")[0]
    assert str(caught.value).endswith(
        f"is of schema version 1, and this evertalk needs version {KNOWN}, which only the"
        f" schema's owner can apply: {owner}'s evertalk applies it when it connects"
    )


def test_the_shape_written_anew_is_the_triggers(pg_connect: Callable[..., Connection]) -> None:
    from evertalk.pgstore.schema import SHAPE_ALL

    conn = pg_connect()
    chat = PgChat.open(conn, machine="home").chat
    conn.execute(
        "INSERT INTO evertalk.nodes (chat, l, i, text, flag)"
        " SELECT %s, i %% 3, i, repeat('é', i %% 300), 1 + i %% 3"
        " FROM generate_series(0, 700) AS i WHERE i %% 7 <> 3",
        (chat,),
    )
    shape = "SELECT chat, l, chunk, flags, sizes FROM evertalk.shape ORDER BY chat, l, chunk"
    written = conn.execute(shape).fetchall()
    assert len(written) == 9
    conn.execute(SHAPE_ALL.encode("utf-8"))
    assert conn.execute(shape).fetchall() == written


def test_a_role_holding_the_schemas_lock_stops_no_one_connecting(
    pg_server: PgServer, pg_url: str, pg_connect: Callable[..., Connection]
) -> None:
    """The migrations' lock is taken only when a migration is due: another person's role may
    take any advisory lock, and would stop every evertalk connecting while it held this one."""
    pg_connect()
    _, bob = two_people(pg_server, pg_url)
    with psycopg.connect(bob, autocommit=True) as holder:
        holder.execute("SELECT pg_advisory_lock(%s)", (SCHEMA_LOCK,))
        connect(f"{pg_url}?options=-c%20lock_timeout%3D3000").close()  # no wait for bob
