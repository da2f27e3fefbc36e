"""The schema's owner is above row-level security: it may lift it from the tables, or add a
trigger that copies every row they are given. So a person's evertalk works as that owner only
on a database of that person's own, and in no schema another person owns."""

from __future__ import annotations

from collections.abc import Callable

import psycopg
import pytest

from evertalk.pgstore.connect import Connection, connect
from evertalk.pgstore.errors import PgStoreError
from evertalk.pgstore.pgchat import PgChat
from evertalk.pgstore.session import PgSession
from pg_server import PgServer
from pgstore.test_pg_schema import two_people

README = 'see "Several people on one database" in evertalk\'s README'


def role_of(url: str) -> str:
    return url.split("//")[1].split(":")[0]


def test_the_owner_reads_every_chat(
    pg_server: PgServer, pg_url: str, pg_connect: Callable[..., Connection]
) -> None:
    """What the refusals below are for: row-level security does not hold the owner."""
    ann, bob = two_people(pg_server, pg_url)
    PgChat.open(pg_connect(ann), machine="home")  # ann's evertalk makes the schema: she owns it
    with psycopg.connect(bob, autocommit=True) as older:  # bob's chat, by an older evertalk
        older.execute("INSERT INTO evertalk.chats (name) VALUES ('main')")
        older.execute(
            "INSERT INTO evertalk.messages (chat, id, kind, date, text)"
            " SELECT id, 0, 'user', '2026-01-01T00:00:00+00:00', 'bob''s secret'"
            " FROM evertalk.chats"
        )
    with psycopg.connect(ann, autocommit=True) as owner:
        owner.execute("ALTER TABLE evertalk.messages NO FORCE ROW LEVEL SECURITY")
        assert owner.execute("SELECT text FROM evertalk.messages").fetchall() == [("bob's secret",)]


def test_a_person_owning_the_schema_refuses_it_once_it_holds_others_chats(
    pg_server: PgServer, pg_url: str
) -> None:
    ann, bob = two_people(pg_server, pg_url)
    conn = connect(ann)
    try:
        PgChat.open(conn, machine="home")  # her own database: the simple set-up
        with psycopg.connect(bob, autocommit=True) as older:
            older.execute("INSERT INTO evertalk.chats (name) VALUES ('main')")
        with pytest.raises(PgStoreError) as caught:
            PgChat.open(conn, machine="home")
        assert str(caught.value) == (
            f"refusing to work as {role_of(ann)}, the owner of evertalk's schema, on a"
            f" database that holds other people's chats, which its owner can read: {README}"
        )
        # the check lifted nothing for good
        row = conn.execute(
            "SELECT relforcerowsecurity FROM pg_class WHERE oid = 'evertalk.chats'::regclass"
        ).fetchone()
        assert row == (True,)
    finally:
        conn.close()


def test_a_person_refuses_a_schema_another_person_owns(
    pg_server: PgServer, pg_url: str, pg_connect: Callable[..., Connection]
) -> None:
    ann, bob = two_people(pg_server, pg_url)
    PgChat.open(pg_connect(ann), machine="home")
    bob_conn = pg_connect(bob)
    with pytest.raises(PgStoreError) as caught:
        PgChat.open(bob_conn, machine="x")
    assert str(caught.value) == (
        f"evertalk's schema in this database is owned by {role_of(ann)}, another person's"
        f" role, which can read every chat in it: {README}"
    )
    assert bob_conn.execute("SELECT count(*) FROM evertalk.chats").fetchone() == (0,)


def test_a_schema_the_administrator_made_serves_everyone(
    pg_server: PgServer, pg_url: str, pg_connect: Callable[..., Connection]
) -> None:
    pg_connect()  # the superuser made it: above row-level security whoever owns the schema
    ann, bob = two_people(pg_server, pg_url)
    for url in (ann, bob):
        PgChat.open(pg_connect(url), machine="home").append_message("user", "hi")


def test_a_session_says_the_database_cannot_be_used_and_why(
    pg_server: PgServer, pg_url: str, pg_connect: Callable[..., Connection]
) -> None:
    ann, bob = two_people(pg_server, pg_url)
    PgChat.open(pg_connect(ann), machine="home")
    with PgSession(bob, "office") as session:
        assert not session.reconnect()
        where = pg_url.split("@")[1]
        assert session.down_line == (
            f"the database at {where} cannot be used: evertalk's schema in this database is"
            f" owned by {role_of(ann)}, another person's role, which can read every chat in"
            f" it: {README}"
        )
