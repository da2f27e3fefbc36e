"""The database's schema as numbered migrations, applied at connect (SPEC §13).

Migration n brings a database from version n - 1 to n. All the missing ones run in one
transaction under an advisory lock, so that two machines connecting to a new database at once
do not both create it, and a failure leaves the database as it was. A database of a version
newer than this code knows is refused: its tables may mean what this code cannot tell.

Every table holds rows of one chat; row-level security (forced, so that even the tables' owner
is held to it) keeps them to the role that owns the chat: one role per person.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from evertalk.pgstore.errors import PgStoreError

if TYPE_CHECKING:
    import psycopg

SCHEMA_LOCK = 0x65766572_74616C6B  # "evertalk": the advisory lock of the migrations

_PER_CHAT = ("messages", "nodes", "views", "ledger", "leases", "held", "changes")
"""The tables whose rows belong to a chat, by their `chat` column."""


def _row_security() -> str:
    """The policies: a chat is its owner's, and so is every row of it."""
    statements = [
        "ALTER TABLE evertalk.chats ENABLE ROW LEVEL SECURITY",
        "ALTER TABLE evertalk.chats FORCE ROW LEVEL SECURITY",
        "CREATE POLICY owner_only ON evertalk.chats"
        " USING (owner = current_user) WITH CHECK (owner = current_user)",
    ]
    for table in _PER_CHAT:
        mine = "chat IN (SELECT id FROM evertalk.chats WHERE owner = current_user)"
        statements += [
            f"ALTER TABLE evertalk.{table} ENABLE ROW LEVEL SECURITY",
            f"ALTER TABLE evertalk.{table} FORCE ROW LEVEL SECURITY",
            f"CREATE POLICY owner_only ON evertalk.{table} USING ({mine}) WITH CHECK ({mine})",
        ]
    return ";\n".join(statements)


_TABLES = """
CREATE SCHEMA evertalk;
CREATE TABLE evertalk.version (version integer NOT NULL);
CREATE TABLE evertalk.chats (
    id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name text NOT NULL,
    owner name NOT NULL DEFAULT current_user,
    seq bigint NOT NULL DEFAULT 0,      -- bumped by every change to the shared state
    count bigint NOT NULL DEFAULT 0,    -- T: the next message's id
    refused bigint NOT NULL DEFAULT 0,  -- builds refused because the node was built already
    UNIQUE (owner, name)
);
CREATE TABLE evertalk.messages (
    chat bigint NOT NULL REFERENCES evertalk.chats ON DELETE CASCADE,
    id bigint NOT NULL CHECK (id >= 0),
    kind text NOT NULL,
    date text NOT NULL,                 -- as written: ISO 8601 with the writer's offset
    text text NOT NULL,
    images jsonb,
    key text,
    agent text,
    failed boolean NOT NULL DEFAULT false,
    part integer,
    parts integer,
    CHECK ((part IS NULL) = (parts IS NULL)),
    PRIMARY KEY (chat, id),
    UNIQUE (chat, key)
);
CREATE TABLE evertalk.nodes (
    chat bigint NOT NULL REFERENCES evertalk.chats ON DELETE CASCADE,
    l smallint NOT NULL CHECK (l BETWEEN 0 AND 62),
    i bigint NOT NULL CHECK (i >= 0),
    text text NOT NULL,
    flag smallint NOT NULL CHECK (flag IN (1, 2, 3)),  -- built by a model, free, cut
    PRIMARY KEY (chat, l, i)
);
CREATE TABLE evertalk.views (
    chat bigint PRIMARY KEY REFERENCES evertalk.chats ON DELETE CASCADE,
    body text NOT NULL,                 -- view.json's encoding
    t bigint NOT NULL,
    saved timestamptz NOT NULL DEFAULT now()
);
CREATE TABLE evertalk.ledger (
    chat bigint NOT NULL REFERENCES evertalk.chats ON DELETE CASCADE,
    id bigint GENERATED ALWAYS AS IDENTITY,
    row jsonb NOT NULL,
    PRIMARY KEY (chat, id)
);
CREATE TABLE evertalk.leases (
    chat bigint NOT NULL REFERENCES evertalk.chats ON DELETE CASCADE,
    l smallint NOT NULL,
    i bigint NOT NULL,
    machine text NOT NULL,
    expires timestamptz NOT NULL,
    PRIMARY KEY (chat, l, i)
);
CREATE TABLE evertalk.held (
    chat bigint NOT NULL REFERENCES evertalk.chats ON DELETE CASCADE,
    key text NOT NULL,
    machine text NOT NULL,
    kind text NOT NULL,
    text text NOT NULL,
    images jsonb,
    date text NOT NULL,
    PRIMARY KEY (chat, key)
);
CREATE TABLE evertalk.changes (
    chat bigint NOT NULL REFERENCES evertalk.chats ON DELETE CASCADE,
    seq bigint NOT NULL,
    machine text NOT NULL,
    what jsonb NOT NULL,
    at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (chat, seq)
);
GRANT USAGE ON SCHEMA evertalk TO PUBLIC;
GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA evertalk TO PUBLIC;
GRANT USAGE ON ALL SEQUENCES IN SCHEMA evertalk TO PUBLIC;
REVOKE INSERT, UPDATE, DELETE ON evertalk.version FROM PUBLIC;
"""

MIGRATIONS: tuple[str, ...] = (_TABLES + _row_security(),)
"""MIGRATIONS[n - 1] brings the schema to version n."""

KNOWN = len(MIGRATIONS)


def schema_version(conn: psycopg.Connection[Any]) -> int:
    """The database's version: 0 when it holds no evertalk schema."""
    exists = conn.execute("SELECT to_regclass('evertalk.version') IS NOT NULL").fetchone()
    if exists is None or not exists[0]:
        return 0
    row = conn.execute("SELECT max(version) FROM evertalk.version").fetchone()
    return int(row[0]) if row is not None and row[0] is not None else 0


def too_new(where: str, found: int) -> PgStoreError:
    return PgStoreError(
        f"the database at {where} is of schema version {found}; "
        f"this evertalk knows up to {KNOWN}: upgrade evertalk"
    )


def apply_schema(conn: psycopg.Connection[Any], where: str) -> int:
    """Bring the database to version KNOWN (the connection in autocommit mode); how many
    migrations ran. `where` names the database in the error of a newer one."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK,))
        found = schema_version(conn)
        if found > KNOWN:
            raise too_new(where, found)
        for migration in MIGRATIONS[found:]:
            conn.execute(migration.encode("utf-8"))
        if found < KNOWN:
            conn.execute("DELETE FROM evertalk.version")
            conn.execute("INSERT INTO evertalk.version (version) VALUES (%s)", (KNOWN,))
    return KNOWN - found
