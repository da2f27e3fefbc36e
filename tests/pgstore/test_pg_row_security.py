"""One role per person: a role sees and changes only its own chats (row-level security)."""

from __future__ import annotations

from collections.abc import Callable
from uuid import uuid4

import psycopg
import pytest

from evertalk.memory.core import SavedViews
from evertalk.pgstore.connect import Connection
from evertalk.pgstore.errors import PgStoreError
from evertalk.pgstore.listen import Listener
from evertalk.pgstore.pgchat import PgChat
from pg_server import PgServer

TABLES = ("chats", "messages", "nodes", "views", "changes", "leases", "failures")


def two_roles(pg_server: PgServer, pg_url: str) -> tuple[str, str]:
    """The URLs of two new roles, ann's and bob's, in the test's database."""
    database = pg_url.rpartition("/")[2]
    roles = [f"{name}_{uuid4().hex[:8]}" for name in ("ann", "bob")]
    for role in roles:
        pg_server.create_role(role)
    return pg_server.url(database, roles[0]), pg_server.url(database, roles[1])


def test_a_role_cannot_read_another_roles_chat(
    pg_server: PgServer, pg_url: str, pg_connect: Callable[..., Connection]
) -> None:
    pg_connect()  # the administrator creates the schema; people's roles may not
    database = pg_url.rpartition("/")[2]
    ann, bob = (f"{name}_{uuid4().hex[:8]}" for name in ("ann", "bob"))
    for role in (ann, bob):
        pg_server.create_role(role)
    ann_chat = PgChat.open(pg_connect(pg_server.url(database, ann)), machine="home")
    ann_chat.append_message("user", "ann's secret")
    assert ann_chat.build(0, 0, "a summary of it")
    assert ann_chat.claim(0, 0, 60) is False  # built: no lease
    ann_chat.save_views(SavedViews(1, [(0, 0)], None, False, False))
    assert ann_chat.count_failure(1, 0) == 1

    bob_conn = pg_connect(pg_server.url(database, bob))
    for table in TABLES:
        assert bob_conn.execute(f"SELECT count(*) FROM evertalk.{table}").fetchone() == (0,)
    with pytest.raises(PgStoreError, match="there is no chat 'main'"):
        PgChat.open(bob_conn, machine="x", create=False)
    bob_chat = PgChat.open(bob_conn, machine="x")  # a chat of the same name: bob's own
    assert bob_chat.chat != ann_chat.chat and bob_chat.message_count == 0

    # bob naming ann's chat by its id gets nowhere
    intruder = PgChat(bob_conn, ann_chat.chat, "main", "x")
    assert intruder.read_messages(0, 10) == [] and intruder.load_views() is None
    with pytest.raises(PgStoreError, match="not in the database"):
        intruder.append_message("user", "hi ann")
    with pytest.raises(PgStoreError, match="row-level security"):
        intruder.count_failure(1, 0)
    with pytest.raises(psycopg.errors.InsufficientPrivilege, match="row-level security"):
        bob_conn.execute(
            "INSERT INTO evertalk.messages (chat, id, kind, date, text)"
            " VALUES (%s, 1, 'user', '2026-01-01T00:00:00+00:00', 'forged')",
            (ann_chat.chat,),
        )
    with pytest.raises(psycopg.errors.InsufficientPrivilege, match="row-level security"):
        bob_conn.execute("INSERT INTO evertalk.chats (name, owner) VALUES ('x', %s)", (ann,))
    assert ann_chat.message_count == 1 and ann_chat.read_message(0).text == "ann's secret"


def test_another_role_hears_nothing_of_a_chat(
    pg_server: PgServer, pg_url: str, pg_connect: Callable[..., Connection]
) -> None:
    """Row-level security does not cover NOTIFY: a role may listen on any channel it can
    name. A chat's channel is drawn from a secret only its owner's role can read."""
    pg_connect()
    ann_url, bob_url = two_roles(pg_server, pg_url)
    ann = PgChat.open(pg_connect(ann_url), machine="home")
    bob = PgChat.open(pg_connect(bob_url), machine="x")
    bob.conn.execute(f"LISTEN {bob.channel}")
    bob.conn.execute(f'LISTEN "evertalk_chat_{ann.chat}"')  # named after the chat's id
    with pytest.raises(PgStoreError, match="not in the database"):
        Listener(bob_url, ann.chat)
    assert bob.conn.execute("SELECT count(*) FROM evertalk.chats").fetchone() == (1,)

    ann.append_message("user", "ann's secret")
    bob.append_message("user", "bob's own")  # committed after ann's: heard after hers
    heard = list(bob.conn.notifies(timeout=10, stop_after=1))
    assert [(each.channel, each.payload) for each in heard] == [(bob.channel, "1")]
    assert ann.channel != bob.channel
    with Listener(ann_url, ann.chat) as ann_listener:
        assert ann_listener.channel == ann.channel
