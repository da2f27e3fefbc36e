"""`evertalk store init`: several people on one database, whose schema a role of its own owns.

Whoever connects first to a database owns the schema evertalk makes, and the owner is above
row-level security (test_pg_owner.py). After `init`, no person's role owns anything: each may
use its own chat, and can neither lift the row-level security, add a trigger or policy, lock
another's rows out, nor read another's chat.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from uuid import uuid4

import psycopg
import pytest

from evertalk.memory.core import SavedViews
from evertalk.pgstore.connect import Connection, open_connection
from evertalk.pgstore.errors import PgStoreError
from evertalk.pgstore.listen import Listener
from evertalk.pgstore.nodes import node_shape
from evertalk.pgstore.pgchat import PgChat
from evertalk.pgstore.schema import KNOWN, MIGRATIONS, schema_version
from evertalk.pgstore.store_init import Initialized, init_store
from evertalk.pgstore.turns import TurnLock
from pg_server import PgServer

Denied = psycopg.errors.InsufficientPrivilege


class Roles:
    """The test database's administrator (no superuser: CREATEROLE, and the database's owner),
    and people's roles, each named for the test alone (roles are the server's, not the
    database's)."""

    def __init__(self, pg_server: PgServer, pg_url: str) -> None:
        self.server = pg_server
        self.database = pg_url.rpartition("/")[2]
        self.tag = uuid4().hex[:8]
        self.admin = self.person("admin")
        with psycopg.connect(pg_url, autocommit=True) as root:
            root.execute(f'ALTER ROLE "{self.admin}" CREATEROLE'.encode())
            root.execute(f'ALTER DATABASE "{self.database}" OWNER TO "{self.admin}"'.encode())
        self.owner = f"owner_{self.tag}"

    def person(self, name: str) -> str:
        role = f"{name}_{self.tag}"
        self.server.create_role(role)
        return role

    def url(self, role: str) -> str:
        return self.server.url(self.database, role)

    def init(self, *people: str, owner: str | None = None) -> Initialized:
        conn = open_connection(self.url(self.admin))
        try:
            return init_store(conn, "here", owner or self.owner, people)
        finally:
            conn.close()


@pytest.fixture
def roles(pg_server: PgServer, pg_url: str) -> Roles:
    return Roles(pg_server, pg_url)


@pytest.fixture
def opened(pg_connect: Callable[..., Connection]) -> Iterator[Callable[[str], PgChat]]:
    yield lambda url: PgChat.open(pg_connect(url), machine="home")


def test_people_use_their_chats_and_nothing_more(
    roles: Roles, pg_connect: Callable[..., Connection], opened: Callable[[str], PgChat]
) -> None:
    ann, bob = roles.person("ann"), roles.person("bob")
    done = roles.init(ann, bob)
    assert done == Initialized(roles.owner, True, KNOWN, tuple(sorted((ann, bob))))

    for role in (ann, bob):  # all that evertalk does with a chat
        chat = opened(roles.url(role))
        chat.append_message("user", f"{role}'s secret")
        chat.append_message("ever", "noted")
        assert chat.build(0, 0, "a summary") and chat.claim(1, 0, 60)
        assert chat.count_failure(1, 0) == 1 and chat.release(1, 0)
        chat.save_views(SavedViews(2, [(0, 0), (0, 1)], None, False, False))
        chat.add_usage('{"model": "m"}')
        assert list(node_shape(chat.conn, chat.chat, 2).flags[0]) == [1, 0]
        with TurnLock(lambda role=role: pg_connect(roles.url(role)), chat.chat, "home") as turn:
            assert turn.try_take() == 1 and turn.holder() == "home"
        Listener(roles.url(role), chat.chat).close()

    ann_conn = pg_connect(roles.url(ann))
    assert ann_conn.execute("SELECT text FROM evertalk.messages").fetchall() == [
        (f"{ann}'s secret",),
        ("noted",),
    ]
    attempts = (
        "ALTER TABLE evertalk.messages NO FORCE ROW LEVEL SECURITY",
        "ALTER TABLE evertalk.messages DISABLE ROW LEVEL SECURITY",
        "CREATE POLICY open ON evertalk.messages USING (true)",
        "CREATE TRIGGER copy AFTER INSERT ON evertalk.messages"
        " FOR EACH STATEMENT EXECUTE FUNCTION evertalk.shape_nodes()",
        "CREATE TABLE evertalk.copied (text text)",
        "CREATE OR REPLACE FUNCTION evertalk.text_size(t text) RETURNS integer"
        " LANGUAGE sql AS 'SELECT 0'",
        f'SET ROLE "{roles.owner}"',
    )
    for attempt in attempts:
        with pytest.raises(Denied):
            ann_conn.execute(attempt.encode())
    for table in ("messages", "nodes", "changes", "ledger"):  # only what a change needs
        with pytest.raises(Denied), ann_conn.transaction():
            ann_conn.execute(f"LOCK TABLE evertalk.{table} IN SHARE MODE".encode())
    row = ann_conn.execute(
        "SELECT rolcanlogin FROM pg_roles WHERE rolname = %s", (roles.owner,)
    ).fetchone()
    assert row == (False,)

    carl = roles.person("carl")  # granted nothing: not even the schema's name
    with pytest.raises(PgStoreError, match="permission denied for schema evertalk"):
        opened(roles.url(carl))


def test_init_again_grants_more_people_and_keeps_the_others(
    roles: Roles, opened: Callable[[str], PgChat]
) -> None:
    ann, bob = roles.person("ann"), roles.person("bob")
    roles.init(ann)
    opened(roles.url(ann)).append_message("user", "hi")
    assert roles.init(bob) == Initialized(roles.owner, False, 0, tuple(sorted((ann, bob))))
    assert opened(roles.url(ann)).message_count == 1
    assert opened(roles.url(bob)).message_count == 0


def test_init_brings_an_older_schema_up_to_date_for_every_chat(
    roles: Roles, pg_url: str, opened: Callable[[str], PgChat]
) -> None:
    """The migrations run as the owner, whom row-level security holds like anyone."""
    ann = roles.person("ann")
    with psycopg.connect(pg_url, autocommit=True) as root:  # an init of version 1
        root.execute(f'CREATE ROLE "{roles.owner}" NOLOGIN'.encode())
        root.execute(f'CREATE SCHEMA evertalk AUTHORIZATION "{roles.owner}"'.encode())
        root.execute(f'SET ROLE "{roles.owner}"'.encode())
        root.execute(MIGRATIONS[0].encode())
        root.execute("INSERT INTO evertalk.version VALUES (1)")
    with psycopg.connect(roles.url(ann), autocommit=True) as older:
        older.execute("INSERT INTO evertalk.chats (name, count) VALUES ('main', 2)")
        older.execute(
            "INSERT INTO evertalk.nodes (chat, l, i, text, flag)"
            " SELECT id, 0, 1, 'été', 2 FROM evertalk.chats"
        )
    assert roles.init(ann).migrations == KNOWN - 1
    chat = opened(roles.url(ann))
    assert schema_version(chat.conn) == KNOWN
    assert list(node_shape(chat.conn, chat.chat, 2).flags[0]) == [0, 2]


def test_init_refuses_in_one_line_and_changes_nothing(
    roles: Roles, pg_url: str, pg_connect: Callable[..., Connection]
) -> None:
    ann = roles.person("ann")
    refusals = {
        f"there is no role nobody_{roles.tag} in the database at here": (f"nobody_{roles.tag}",),
        "postgres bypasses row-level security (a superuser, or BYPASSRLS): every chat would be"
        " open to it; give the person a role of their own": (ann, "postgres"),
        f"{roles.admin} has the rights of {roles.owner}, the schema's owner, which is above"
        " row-level security: --grant names the roles people log in as": (roles.admin,),
    }
    for line, people in refusals.items():
        with pytest.raises(PgStoreError) as caught:
            roles.init(*people)
        assert str(caught.value) == line
    with pytest.raises(PgStoreError) as caught:
        roles.init(ann, owner=ann)
    assert str(caught.value) == (
        f"{ann} is a role one may log in as: the schema's owner must be a role of its own,"
        " that no one logs in as (--owner names another)"
    )
    with psycopg.connect(pg_url, autocommit=True) as root:  # no role, no schema was made
        made = "SELECT count(*) FROM pg_roles WHERE rolname = %s"
        assert root.execute(made, (roles.owner,)).fetchone() == (0,)
        made = "SELECT count(*) FROM pg_namespace WHERE nspname = 'evertalk'"
        assert root.execute(made).fetchone() == (0,)
        root.execute(f'GRANT CREATE ON DATABASE "{roles.database}" TO "{ann}"'.encode())
    PgChat.open(pg_connect(roles.url(ann)), machine="home")  # ann's evertalk made it: hers
    with pytest.raises(PgStoreError) as caught:
        roles.init(ann)
    assert str(caught.value) == (
        f"evertalk's schema at here is owned by {ann}, not {roles.owner}: copy each chat out"
        " with `evertalk store pull`, drop the schema, run `evertalk store init` again, then"
        " push each chat back"
    )
