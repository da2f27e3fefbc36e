"""The database's schema as numbered migrations, applied at connect (SPEC §13).

Migration n brings a database from version n - 1 to n. All the missing ones run in one
transaction under an advisory lock, so that two machines connecting to a new database at once
do not both create it, and a failure leaves the database as it was. A database of a version
newer than this code knows is refused: its tables may mean what this code cannot tell.

Every table holds rows of one chat; row-level security (forced, so that even the tables' owner
is held to it) keeps them to the role that owns the chat: one role per person. The owner may
lift it, though: where several people share a database, the schema belongs to a role no one
logs in as (store_init.py), and a migration that must see every chat lifts it for itself.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from evertalk.pgstore.errors import PgStoreError

if TYPE_CHECKING:
    import psycopg

SCHEMA_LOCK = 0x65766572_74616C6B  # "evertalk": the advisory lock of the migrations

_PER_CHAT = ("messages", "nodes", "views", "ledger", "leases", "held", "turns", "changes")
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
    n bigint GENERATED ALWAYS AS IDENTITY,  -- the order in which messages were held
    machine text NOT NULL,              -- the machine that accepted it: its turn takes it
    kind text NOT NULL CHECK (kind IN ('user', 'work')),
    text text NOT NULL,
    date text NOT NULL,                 -- when it was accepted, ISO 8601 with its offset
    images jsonb,                       -- names in the accepting machine's chat/images/
    workdir text,
    agent text,
    model text,
    quiet boolean NOT NULL DEFAULT false,  -- a stop report: rides with a turn, opens none
    PRIMARY KEY (chat, key)
);
CREATE INDEX held_order ON evertalk.held (chat, machine, n);
CREATE TABLE evertalk.turns (
    chat bigint NOT NULL REFERENCES evertalk.chats ON DELETE CASCADE,
    pid integer NOT NULL,               -- the server process of a session that takes the lock
    machine text NOT NULL,              -- the machine of that session
    PRIMARY KEY (chat, pid)
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

_CHANGES = """
CREATE FUNCTION evertalk.record_change(
    p_chat bigint, p_machine text, p_what jsonb, p_count bigint
) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    new_seq bigint;
BEGIN
    UPDATE evertalk.chats AS c SET seq = c.seq + 1, count = p_count
        WHERE c.id = p_chat RETURNING c.seq INTO new_seq;
    INSERT INTO evertalk.changes (chat, seq, machine, what)
        VALUES (p_chat, new_seq, p_machine, p_what);
    PERFORM pg_notify('evertalk_chat_' || p_chat, new_seq::text);
    RETURN new_seq;
END
$$;
CREATE FUNCTION evertalk.log_messages(
    p_chat bigint, p_machine text, p_logged text[], p_ids bigint[],
    p_kinds text[], p_dates text[], p_texts text[], p_images text[], p_keys text[],
    p_agents text[], p_failed boolean[], p_parts integer[], p_partss integer[],
    p_leaves text[]
) RETURNS TABLE (t bigint, first_id bigint, pages integer, seq bigint) LANGUAGE plpgsql AS $$
DECLARE
    n integer := cardinality(p_texts);
BEGIN
    SELECT c.count INTO t FROM evertalk.chats AS c WHERE c.id = p_chat FOR UPDATE;
    IF NOT FOUND THEN
        RETURN NEXT;
        RETURN;
    END IF;
    IF p_logged IS NOT NULL THEN
        SELECT m.id, coalesce(m.parts, 1) INTO first_id, pages FROM evertalk.messages AS m
            WHERE m.chat = p_chat AND m.key = ANY (p_logged) ORDER BY m.id LIMIT 1;
        IF FOUND THEN
            RETURN NEXT;
            RETURN;
        END IF;
    END IF;
    IF p_ids IS NOT NULL AND p_ids <> ARRAY(SELECT generate_series(t, t + n - 1)) THEN
        RETURN NEXT;
        RETURN;
    END IF;
    INSERT INTO evertalk.messages
        (chat, id, kind, date, text, images, key, agent, failed, part, parts)
        SELECT p_chat, t + m.n - 1, m.kind, m.date, m.text, m.images::jsonb, m.key, m.agent,
            m.failed, m.part, m.parts
        FROM unnest(p_kinds, p_dates, p_texts, p_images, p_keys, p_agents, p_failed, p_parts,
            p_partss) WITH ORDINALITY AS m(kind, date, text, images, key, agent, failed, part,
            parts, n);
    -- the leaves that are their message's own line, as every machine derives them
    INSERT INTO evertalk.nodes (chat, l, i, text, flag)
        SELECT p_chat, 0, t + f.n - 1, f.leaf, 2
        FROM unnest(p_leaves) WITH ORDINALITY AS f(leaf, n) WHERE f.leaf IS NOT NULL
        ON CONFLICT DO NOTHING;
    seq := evertalk.record_change(
        p_chat, p_machine, jsonb_build_object('append', jsonb_build_array(t, n)), t + n);
    first_id := t;
    pages := n;
    RETURN NEXT;
END
$$;
CREATE FUNCTION evertalk.put_node(
    p_chat bigint, p_machine text, p_needed bigint,
    p_l smallint[], p_i bigint[], p_texts text[], p_flags smallint[]
) RETURNS TABLE (t bigint, stored boolean, seq bigint) LANGUAGE plpgsql AS $$
DECLARE
    parents jsonb;
BEGIN
    SELECT c.count INTO t FROM evertalk.chats AS c WHERE c.id = p_chat FOR UPDATE;
    IF NOT FOUND OR t < p_needed THEN
        RETURN NEXT;
        RETURN;
    END IF;
    INSERT INTO evertalk.nodes (chat, l, i, text, flag)
        VALUES (p_chat, p_l[1], p_i[1], p_texts[1], p_flags[1])
        ON CONFLICT (chat, l, i) DO NOTHING;
    stored := FOUND;
    IF NOT stored THEN
        UPDATE evertalk.chats AS c SET refused = c.refused + 1 WHERE c.id = p_chat;
        RETURN NEXT;
        RETURN;
    END IF;
    WITH given AS (
        SELECT * FROM unnest(p_l[2:], p_i[2:], p_texts[2:], p_flags[2:])
            WITH ORDINALITY AS g(l, i, text, flag, n)
    ), written AS (
        INSERT INTO evertalk.nodes (chat, l, i, text, flag)
            SELECT p_chat, g.l, g.i, g.text, g.flag FROM given AS g
            ON CONFLICT (chat, l, i) DO NOTHING
            RETURNING nodes.l, nodes.i
    )
    SELECT jsonb_agg(jsonb_build_array(g.l, g.i) ORDER BY g.n) INTO parents
        FROM written AS w JOIN given AS g ON (g.l, g.i) = (w.l, w.i);
    DELETE FROM evertalk.leases AS s WHERE s.chat = p_chat AND s.l = p_l[1] AND s.i = p_i[1];
    seq := evertalk.record_change(p_chat, p_machine, jsonb_build_object('nodes',
        jsonb_build_array(jsonb_build_array(p_l[1], p_i[1])) || coalesce(parents, '[]')), t);
    RETURN NEXT;
END
$$;
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA evertalk TO PUBLIC
"""
"""The changes that hold the chat's row lock, as functions: an append, a build or a cut is one
call, one round trip, its own transaction (the caller's autocommit) whose commit is synchronous.
Each takes the lock first; in a volatile function every statement after it reads a new snapshot,
so that a message key looked up under the lock includes what the lock's last holder committed.
They run with the caller's rights: row-level security holds in them as it does outside.
`record_change` ends every change: T set, the sequence number bumped, the change written to the
feed, and the chat's channel (`chats.channel`) notified at the commit.
"""

_SHAPE = r"""
CREATE TABLE evertalk.shape (
    chat bigint NOT NULL REFERENCES evertalk.chats ON DELETE CASCADE,
    l smallint NOT NULL,
    chunk bigint NOT NULL,
    flags bytea NOT NULL,  -- a byte per node of the chunk: 0 unbuilt, else the node's flag
    sizes bytea NOT NULL,  -- four bytes per node, big-endian: its text's size in UTF-8
    PRIMARY KEY (chat, l, chunk)
);
CREATE FUNCTION evertalk.text_size(t text) RETURNS integer LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN left(t, 5) <> E'\x01nul\x01' THEN octet_length(t)
        ELSE octet_length(substr(t, 6))
            - (octet_length(substr(t, 6))
               - octet_length(regexp_replace(substr(t, 6), E'\\\\.', '', 'g'))) / 2
    END
$$;
CREATE FUNCTION evertalk.shape_set(
    p_chat bigint, p_l smallint, p_i bigint, p_flag smallint, p_text text
) RETURNS void LANGUAGE plpgsql AS $$
DECLARE
    k bigint := p_i / 256;
    pos integer := (p_i % 256)::integer;
BEGIN
    INSERT INTO evertalk.shape (chat, l, chunk, flags, sizes)
        VALUES (p_chat, p_l, k, decode(repeat('00', 256), 'hex'),
            decode(repeat('00', 1024), 'hex'))
        ON CONFLICT DO NOTHING;
    UPDATE evertalk.shape AS s SET flags = set_byte(s.flags, pos, p_flag),
        sizes = overlay(s.sizes PLACING int4send(evertalk.text_size(p_text))
            FROM pos * 4 + 1 FOR 4)
        WHERE s.chat = p_chat AND s.l = p_l AND s.chunk = k;
END
$$;
CREATE FUNCTION evertalk.shape_nodes() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    r record;
    k bigint;
    at_chat bigint;
    at_l smallint;
    at_k bigint := -1;
    f bytea;
    s bytea;
BEGIN
    -- in the order of the rows' keys, each chunk read and written once: a copy of thousands
    -- of nodes costs a write per chunk, and two writers lock chunks in the same order
    FOR r IN SELECT n.chat, n.l, n.i, n.flag, n.text FROM new_nodes AS n
            ORDER BY n.chat, n.l, n.i LOOP
        k := r.i / 256;
        IF at_k < 0 OR r.chat <> at_chat OR r.l <> at_l OR k <> at_k THEN
            IF at_k >= 0 THEN
                UPDATE evertalk.shape AS x SET flags = f, sizes = s
                    WHERE x.chat = at_chat AND x.l = at_l AND x.chunk = at_k;
            END IF;
            at_chat := r.chat;
            at_l := r.l;
            at_k := k;
            INSERT INTO evertalk.shape (chat, l, chunk, flags, sizes)
                VALUES (at_chat, at_l, at_k, decode(repeat('00', 256), 'hex'),
                    decode(repeat('00', 1024), 'hex'))
                ON CONFLICT DO NOTHING;
            SELECT x.flags, x.sizes INTO f, s FROM evertalk.shape AS x
                WHERE x.chat = at_chat AND x.l = at_l AND x.chunk = at_k FOR UPDATE;
        END IF;
        f := set_byte(f, (r.i % 256)::integer, r.flag);
        s := overlay(s PLACING int4send(evertalk.text_size(r.text))
            FROM (r.i % 256)::integer * 4 + 1 FOR 4);
    END LOOP;
    IF at_k >= 0 THEN
        UPDATE evertalk.shape AS x SET flags = f, sizes = s
            WHERE x.chat = at_chat AND x.l = at_l AND x.chunk = at_k;
    END IF;
    RETURN NULL;
END
$$;
ALTER TABLE evertalk.shape ENABLE ROW LEVEL SECURITY;
ALTER TABLE evertalk.shape FORCE ROW LEVEL SECURITY;
CREATE POLICY owner_only ON evertalk.shape
    USING (chat IN (SELECT id FROM evertalk.chats WHERE owner = current_user))
    WITH CHECK (chat IN (SELECT id FROM evertalk.chats WHERE owner = current_user));
GRANT SELECT, INSERT, UPDATE, DELETE ON evertalk.shape TO PUBLIC;
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA evertalk TO PUBLIC;
CREATE TRIGGER shape AFTER INSERT ON evertalk.nodes REFERENCING NEW TABLE AS new_nodes
    FOR EACH STATEMENT EXECUTE FUNCTION evertalk.shape_nodes()
"""
"""Every built node's flag and size, 256 nodes to a row, kept by a trigger as nodes are stored
(the nodes stored before it are shaped by `SHAPE_ALL`): an open reads the tree's shape in a
few thousand rows at a million messages, not a row per node."""

SHAPE_ALL = """
DELETE FROM evertalk.shape;
INSERT INTO evertalk.shape (chat, l, chunk, flags, sizes)
SELECT k.chat, k.l, k.chunk,
    decode(string_agg(lpad(to_hex(coalesce(n.flag, 0)), 2, '0'), '' ORDER BY p), 'hex'),
    decode(string_agg(lpad(to_hex(coalesce(evertalk.text_size(n.text), 0)), 8, '0'), ''
        ORDER BY p), 'hex')
FROM (SELECT DISTINCT chat, l, i / 256 AS chunk FROM evertalk.nodes) AS k
    CROSS JOIN generate_series(0, 255) AS p
    LEFT JOIN evertalk.nodes AS n ON (n.chat, n.l, n.i) = (k.chat, k.l, k.chunk * 256 + p)
GROUP BY k.chat, k.l, k.chunk
"""
"""The shape of every stored node, written anew: each chunk's row in one statement, its bytes
as the trigger writes them (a flag per node, then each size in four bytes, big-endian)."""


def _every_chat(statements: str, tables: tuple[str, ...]) -> str:
    """`statements` over the rows of every chat, whatever role runs the migration. Only the
    tables' owner may, and row-level security holds it while it is forced: it is lifted for
    the tables and forced again within the migration's transaction, and no one sees them
    meanwhile (ALTER TABLE locks them)."""
    lift = [f"ALTER TABLE evertalk.{table} NO FORCE ROW LEVEL SECURITY" for table in tables]
    force = [f"ALTER TABLE evertalk.{table} FORCE ROW LEVEL SECURITY" for table in tables]
    return ";\n".join([*lift, statements.strip(), *force])


_LOG_MESSAGES = """
CREATE FUNCTION evertalk.log_messages(
    p_chat bigint, p_machine text, p_logged text[], p_ids bigint[],
    p_kinds text[], p_dates text[], p_texts text[], p_images text[], p_keys text[],
    p_agents text[], p_failed boolean[], p_parts integer[], p_partss integer[],
    p_leaves text[], p_epoch bigint
) RETURNS TABLE (t bigint, first_id bigint, pages integer, seq bigint, stale boolean)
LANGUAGE plpgsql AS $$
DECLARE
    n integer := cardinality(p_texts);
    epoch bigint;
BEGIN
    SELECT c.count, c.turn_epoch INTO t, epoch FROM evertalk.chats AS c
        WHERE c.id = p_chat FOR UPDATE;
    IF NOT FOUND THEN
        RETURN NEXT;
        RETURN;
    END IF;
    IF p_logged IS NOT NULL THEN
        SELECT m.id, coalesce(m.parts, 1) INTO first_id, pages FROM evertalk.messages AS m
            WHERE m.chat = p_chat AND m.key = ANY (p_logged) ORDER BY m.id LIMIT 1;
        IF FOUND THEN
            RETURN NEXT;
            RETURN;
        END IF;
    END IF;
    -- a turn's append after another session took the turn: its turn is over
    stale := p_epoch IS NOT NULL AND p_epoch <> epoch;
    IF stale THEN
        RETURN NEXT;
        RETURN;
    END IF;
    IF p_ids IS NOT NULL AND p_ids <> ARRAY(SELECT generate_series(t, t + n - 1)) THEN
        RETURN NEXT;
        RETURN;
    END IF;
    INSERT INTO evertalk.messages
        (chat, id, kind, date, text, images, key, agent, failed, part, parts)
        SELECT p_chat, t + m.n - 1, m.kind, m.date, m.text, m.images::jsonb, m.key, m.agent,
            m.failed, m.part, m.parts
        FROM unnest(p_kinds, p_dates, p_texts, p_images, p_keys, p_agents, p_failed, p_parts,
            p_partss) WITH ORDINALITY AS m(kind, date, text, images, key, agent, failed, part,
            parts, n);
    INSERT INTO evertalk.nodes (chat, l, i, text, flag)
        SELECT p_chat, 0, t + f.n - 1, f.leaf, 2
        FROM unnest(p_leaves) WITH ORDINALITY AS f(leaf, n) WHERE f.leaf IS NOT NULL
        ON CONFLICT DO NOTHING;
    seq := evertalk.record_change(
        p_chat, p_machine, jsonb_build_object('append', jsonb_build_array(t, n)), t + n);
    first_id := t;
    pages := n;
    RETURN NEXT;
END
$$
"""
"""A turn's appends fenced (migration 3): one whose epoch is not the chat's any more is refused."""

_FENCES = (
    """
ALTER TABLE evertalk.chats ADD COLUMN turn_epoch bigint NOT NULL DEFAULT 0;
ALTER TABLE evertalk.nodes ADD COLUMN seq bigint;  -- the change that stored a built or cut node
CREATE TABLE evertalk.failures (
    chat bigint NOT NULL REFERENCES evertalk.chats ON DELETE CASCADE,
    l smallint NOT NULL,
    i bigint NOT NULL,
    count integer NOT NULL,             -- failed compactions of the node, on any machine
    PRIMARY KEY (chat, l, i)
);
ALTER TABLE evertalk.failures ENABLE ROW LEVEL SECURITY;
ALTER TABLE evertalk.failures FORCE ROW LEVEL SECURITY;
CREATE POLICY owner_only ON evertalk.failures
    USING (chat IN (SELECT id FROM evertalk.chats WHERE owner = current_user))
    WITH CHECK (chat IN (SELECT id FROM evertalk.chats WHERE owner = current_user));
GRANT SELECT, INSERT, UPDATE, DELETE ON evertalk.failures TO PUBLIC;
DROP FUNCTION evertalk.log_messages(bigint, text, text[], bigint[], text[], text[], text[],
    text[], text[], text[], boolean[], integer[], integer[], text[]);
"""
    + _LOG_MESSAGES
    + """;
CREATE OR REPLACE FUNCTION evertalk.put_node(
    p_chat bigint, p_machine text, p_needed bigint,
    p_l smallint[], p_i bigint[], p_texts text[], p_flags smallint[]
) RETURNS TABLE (t bigint, stored boolean, seq bigint) LANGUAGE plpgsql AS $$
DECLARE
    parents jsonb;
    last_seq bigint;
BEGIN
    SELECT c.count, c.seq INTO t, last_seq FROM evertalk.chats AS c WHERE c.id = p_chat FOR UPDATE;
    IF NOT FOUND OR t < p_needed THEN
        RETURN NEXT;
        RETURN;
    END IF;
    INSERT INTO evertalk.nodes (chat, l, i, text, flag, seq)
        VALUES (p_chat, p_l[1], p_i[1], p_texts[1], p_flags[1], last_seq + 1)
        ON CONFLICT (chat, l, i) DO NOTHING;
    stored := FOUND;
    IF NOT stored THEN
        -- the same line stored by this machine's own change: a call sent again after its
        -- reply was lost, done already
        SELECT n.seq INTO seq FROM evertalk.nodes AS n
            JOIN evertalk.changes AS ch ON ch.chat = n.chat AND ch.seq = n.seq
            WHERE n.chat = p_chat AND n.l = p_l[1] AND n.i = p_i[1] AND n.text = p_texts[1]
              AND n.flag = p_flags[1] AND ch.machine = p_machine;
        stored := FOUND;
        IF NOT stored THEN
            UPDATE evertalk.chats AS c SET refused = c.refused + 1 WHERE c.id = p_chat;
        END IF;
        RETURN NEXT;
        RETURN;
    END IF;
    WITH given AS (
        SELECT * FROM unnest(p_l[2:], p_i[2:], p_texts[2:], p_flags[2:])
            WITH ORDINALITY AS g(l, i, text, flag, n)
    ), written AS (
        INSERT INTO evertalk.nodes (chat, l, i, text, flag)
            SELECT p_chat, g.l, g.i, g.text, g.flag FROM given AS g
            ON CONFLICT (chat, l, i) DO NOTHING
            RETURNING nodes.l, nodes.i
    )
    SELECT jsonb_agg(jsonb_build_array(g.l, g.i) ORDER BY g.n) INTO parents
        FROM written AS w JOIN given AS g ON (g.l, g.i) = (w.l, w.i);
    DELETE FROM evertalk.leases AS s WHERE s.chat = p_chat AND s.l = p_l[1] AND s.i = p_i[1];
    DELETE FROM evertalk.failures AS f WHERE f.chat = p_chat AND f.l = p_l[1] AND f.i = p_i[1];
    seq := evertalk.record_change(p_chat, p_machine, jsonb_build_object('nodes',
        jsonb_build_array(jsonb_build_array(p_l[1], p_i[1])) || coalesce(parents, '[]')), t);
    RETURN NEXT;
END
$$;
GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA evertalk TO PUBLIC
"""
)
"""Turns fenced, failures counted per chat, builds sent again taken as done.

Each take of a chat's turn lock bumps `turn_epoch` (turns.py); a turn's appends carry the epoch
it took, and one whose epoch is not the chat's any more is refused under the row lock, after
the key check (what the turn logged while it held the turn stays its own). `failures` counts
a node's failed compactions whichever machine made them, and is cleared by its build. A built
node keeps the sequence number of the change that stored it, so that `put_node` sent again by
its machine after a lost reply finds its own line and is a success, not a refusal."""

_SECRETS = """
ALTER TABLE evertalk.chats
    ADD COLUMN secret text NOT NULL DEFAULT replace(gen_random_uuid()::text, '-', ''),
    ADD COLUMN lock_gen bigint NOT NULL DEFAULT 0;  -- moved on when another role holds the lock
CREATE FUNCTION evertalk.chat_channel(p_secret text) RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT 'evertalk_'
        || left(encode(sha256(convert_to('channel:' || p_secret, 'UTF8')), 'hex'), 32)
$$;
CREATE OR REPLACE FUNCTION evertalk.record_change(
    p_chat bigint, p_machine text, p_what jsonb, p_count bigint
) RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
    new_seq bigint;
    chat_secret text;
BEGIN
    UPDATE evertalk.chats AS c SET seq = c.seq + 1, count = p_count
        WHERE c.id = p_chat RETURNING c.seq, c.secret INTO new_seq, chat_secret;
    INSERT INTO evertalk.changes (chat, seq, machine, what)
        VALUES (p_chat, new_seq, p_machine, p_what);
    PERFORM pg_notify(evertalk.chat_channel(chat_secret), new_seq::text);
    RETURN new_seq;
END
$$
"""
"""Each chat's secret: 122 random bits (gen_random_uuid draws them from the server's strong
source) that only the chat's role can read, under row-level security. Row-level security
covers tables, not NOTIFY channels or advisory locks: any role may listen on a channel or take
a lock it can name, so the chat's channel and its turn lock's keys are drawn from the secret
(`chats.channel`, `turns.lock_keys`), and another role cannot name them."""

_SHARED = _SECRETS + ";\n" + _every_chat(SHAPE_ALL, ("nodes", "shape"))
"""For several people on one database: each chat's secret, and the shape of their nodes,
which migration 2 missed when a role that row-level security held ran it (it saw its own
chats only)."""

_VIEWS_AT = """
ALTER TABLE evertalk.views ADD COLUMN seq bigint  -- the change the views were folded up to
"""
"""The saved views name the change they were folded up to, so that a machine that opens takes
them with the tree as it stood at that change and folds the changes after it (shared_chat.py):
the views it then holds are the other machines'."""

_APPEND = "jsonb_build_object('append', jsonb_build_array(t, n))"
_EPOCHS = _LOG_MESSAGES.replace("CREATE FUNCTION", "CREATE OR REPLACE FUNCTION", 1).replace(
    _APPEND,
    _APPEND
    + " || CASE WHEN p_epoch IS NULL THEN '{}'::jsonb"
    + " ELSE jsonb_build_object('epoch', p_epoch) END",
)
"""A turn's append names its epoch in the change it records, so that whoever reads the stream
(the checker, a follower) can tell one turn's records from another's."""

MIGRATIONS: tuple[str, ...] = (
    _TABLES + _row_security() + ";\n" + _CHANGES,
    _SHAPE + ";\n" + _every_chat(SHAPE_ALL, ("nodes", "shape")),
    _FENCES,
    _SHARED,
    _VIEWS_AT,
    _EPOCHS,
)
"""MIGRATIONS[n - 1] brings the schema to version n."""

KNOWN = len(MIGRATIONS)


def schema_version(conn: psycopg.Connection[Any]) -> int:
    """The database's version: 0 when it holds no evertalk schema."""
    # the catalog read by a query, whose snapshot sees what was committed while this session
    # waited for the migrations' lock (to_regclass may answer from a stale cache)
    exists = conn.execute(
        "SELECT EXISTS (SELECT FROM pg_class AS c JOIN pg_namespace AS n"
        " ON n.oid = c.relnamespace WHERE n.nspname = 'evertalk' AND c.relname = 'version')"
    ).fetchone()
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
    migrations ran. `where` names the database in the error of a newer one.

    The migrations' lock is taken only when one is due: any role may take an advisory lock,
    and another person's that held this one would otherwise stop every connect."""
    found = schema_version(conn)
    if found > KNOWN:
        raise too_new(where, found)
    if found == KNOWN:
        return 0
    with conn.transaction():
        return migrate(conn, where)


def migrate(conn: psycopg.Connection[Any], where: str) -> int:
    """`apply_schema` inside the caller's transaction: the schema made if missing (owned by
    the current role, as are the tables the migrations make), then the missing migrations."""
    conn.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK,))
    found = schema_version(conn)
    if found > KNOWN:
        raise too_new(where, found)
    if found == KNOWN:
        return 0
    if found > 0:
        _check_may_migrate(conn, where, found)
    if found == 0 and not _has_schema(conn):
        conn.execute("CREATE SCHEMA evertalk")
    for migration in MIGRATIONS[found:]:
        conn.execute(migration.encode("utf-8"))
    conn.execute("DELETE FROM evertalk.version")
    conn.execute("INSERT INTO evertalk.version (version) VALUES (%s)", (KNOWN,))
    return KNOWN - found


def _has_schema(conn: psycopg.Connection[Any]) -> bool:
    """Whether the schema is there (`store init` makes it, for a role of its own, before the
    tables): asked first, as CREATE SCHEMA IF NOT EXISTS needs the right to create it."""
    row = conn.execute(
        "SELECT EXISTS (SELECT FROM pg_namespace WHERE nspname = 'evertalk')"
    ).fetchone()
    return row is not None and bool(row[0])


def _check_may_migrate(conn: psycopg.Connection[Any], where: str, found: int) -> None:
    """Refuse in one line, saying who may, when this role cannot bring the schema up to date:
    only its owner (or a role that has the owner's rights) can change its tables."""
    row = conn.execute(
        "SELECT o.rolname, o.rolcanlogin, pg_has_role(o.oid, 'USAGE')"
        " FROM pg_namespace AS n JOIN pg_roles AS o ON o.oid = n.nspowner"
        " WHERE n.nspname = 'evertalk'"
    ).fetchone()
    if row is None or row[2]:
        return
    owner, person = str(row[0]), bool(row[1])
    who = (
        f"{owner}'s evertalk applies it when it connects"
        if person
        else "its administrator applies it with `evertalk store init URL`"
    )
    raise PgStoreError(
        f"the database at {where} is of schema version {found}, and this evertalk needs"
        f" version {KNOWN}, which only the schema's owner can apply: {who}"
    )
