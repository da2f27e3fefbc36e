"""`evertalk store init`: a database made ready for several people (SPEC §13).

The schema's owner is above row-level security, so where several people share a database the
schema belongs to a role of its own that no one logs in as (NOLOGIN): the administrator who
runs `init` makes it, makes the schema owned by it and its tables by running the migrations as
it, and grants each person's role what evertalk needs of each table, no more (nothing to
PUBLIC). Run again, it brings the schema up to date and grants the people named before and
now. All of it is one transaction: a refusal changes nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from psycopg import sql

from evertalk.pgstore.connect import Connection
from evertalk.pgstore.errors import PgStoreError
from evertalk.pgstore.schema import SCHEMA_LOCK, migrate

OWNER = "evertalk_owner"
"""The schema's owner unless `--owner` names another."""

TABLE_GRANTS = {
    "version": "SELECT",
    "chats": "SELECT, INSERT, UPDATE",  # a change bumps the chat's numbers
    "messages": "SELECT, INSERT",
    "nodes": "SELECT, INSERT",
    "shape": "SELECT, INSERT, UPDATE",  # written by the nodes' trigger, as its caller
    "views": "SELECT, INSERT, UPDATE",
    "ledger": "SELECT, INSERT",
    "leases": "SELECT, INSERT, UPDATE, DELETE",
    "held": "",  # no code uses it
    "turns": "SELECT, INSERT, UPDATE, DELETE",
    "changes": "SELECT, INSERT",
    "failures": "SELECT, INSERT, UPDATE, DELETE",
}
"""What a person's role may do with each table: what the store's statements need. UPDATE and
DELETE give LOCK TABLE too, so they are granted only where a change needs them."""


@dataclass(frozen=True, slots=True)
class Initialized:
    owner: str
    made_owner: bool  # the owner's role was made now
    migrations: int  # how many ran
    people: tuple[str, ...]  # every role that may use the schema now


def init_store(
    conn: Connection, where: str, owner: str = OWNER, people: Sequence[str] = ()
) -> Initialized:
    """Make the database at `where` (the autocommit connection `conn`, as an administrator)
    ready for several people: see above."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (SCHEMA_LOCK,))
        made = _owner_role(conn, owner)
        _check_schema(conn, where, owner)
        if not _one(conn, "SELECT pg_has_role(%s, 'MEMBER')", owner):  # to act as the owner
            conn.execute(sql.SQL("GRANT {} TO CURRENT_USER").format(sql.Identifier(owner)))
        for person in people:
            _check_person(conn, where, owner, person)
        if not _one(conn, "SELECT EXISTS (SELECT FROM pg_namespace WHERE nspname = 'evertalk')"):
            conn.execute(
                sql.SQL("CREATE SCHEMA evertalk AUTHORIZATION {}").format(sql.Identifier(owner))
            )
        conn.execute(sql.SQL("SET LOCAL ROLE {}").format(sql.Identifier(owner)))
        ran = migrate(conn, where)  # the tables are the owner's
        everyone = tuple(sorted({*_granted(conn), *people}))
        _grant(conn, everyone)
        conn.execute("RESET ROLE")
    return Initialized(owner, made, ran, everyone)


def _owner_role(conn: Connection, owner: str) -> bool:
    """Make the owner's role, NOLOGIN, unless there is one; whether it was made. One that may
    log in is refused: whoever logs in as it would be above row-level security."""
    row = conn.execute("SELECT rolcanlogin FROM pg_roles WHERE rolname = %s", (owner,)).fetchone()
    if row is None:
        conn.execute(sql.SQL("CREATE ROLE {} NOLOGIN").format(sql.Identifier(owner)))
        return True
    if row[0]:
        raise PgStoreError(
            f"{owner} is a role one may log in as: the schema's owner must be a role of its"
            " own, that no one logs in as (--owner names another)"
        )
    return False


def _check_schema(conn: Connection, where: str, owner: str) -> None:
    """Refuse a schema owned by another role: its owner may have changed what no check here
    would see (a trigger, a policy, a function), and could read every chat."""
    row = conn.execute(
        "SELECT pg_get_userbyid(nspowner) FROM pg_namespace WHERE nspname = 'evertalk'"
    ).fetchone()
    if row is not None and row[0] != owner:
        raise PgStoreError(
            f"evertalk's schema at {where} is owned by {row[0]}, not {owner}: copy each chat"
            " out with `evertalk store pull`, drop the schema, run `evertalk store init` again,"
            " then push each chat back"
        )


def _check_person(conn: Connection, where: str, owner: str, person: str) -> None:
    """Refuse a role that is no person's: missing, the owner, or above row-level security."""
    row = conn.execute(
        "SELECT rolsuper OR rolbypassrls, pg_has_role(oid, %s, 'MEMBER')"
        " FROM pg_roles WHERE rolname = %s",
        (owner, person),
    ).fetchone()
    if row is None:
        raise PgStoreError(f"there is no role {person} in the database at {where}")
    if row[0]:
        raise PgStoreError(
            f"{person} bypasses row-level security (a superuser, or BYPASSRLS): every chat"
            " would be open to it; give the person a role of their own"
        )
    if person == owner or row[1]:
        raise PgStoreError(
            f"{person} has the rights of {owner}, the schema's owner, which is above"
            " row-level security: --grant names the roles people log in as"
        )


def _granted(conn: Connection) -> list[str]:
    """The roles granted the schema before (by an `init` run earlier)."""
    rows = conn.execute(
        "SELECT pg_get_userbyid(a.grantee) FROM pg_namespace AS n, aclexplode(n.nspacl) AS a"
        " WHERE n.nspname = 'evertalk' AND a.privilege_type = 'USAGE'"
        " AND a.grantee <> 0 AND a.grantee <> n.nspowner"
    ).fetchall()
    return [str(row[0]) for row in rows]


def _grant(conn: Connection, people: Sequence[str]) -> None:
    """As the owner: nothing to PUBLIC, and to each person exactly TABLE_GRANTS."""
    tables = conn.execute(
        "SELECT relname FROM pg_class WHERE relnamespace = 'evertalk'::regnamespace"
        " AND relkind IN ('r', 'p') ORDER BY relname"
    ).fetchall()
    unknown = [str(row[0]) for row in tables if row[0] not in TABLE_GRANTS]
    if unknown:  # a migration's table that no grant names: a bug of this module's
        raise PgStoreError(f"store init does not know what people need of {unknown[0]}")
    for what in ("SCHEMA evertalk", *(f"ALL {kind} IN SCHEMA evertalk" for kind in _KINDS)):
        conn.execute(f"REVOKE ALL ON {what} FROM PUBLIC")
    for person in people:
        role = sql.Identifier(person)
        conn.execute(sql.SQL("GRANT USAGE ON SCHEMA evertalk TO {}").format(role))
        conn.execute(sql.SQL("REVOKE ALL ON ALL TABLES IN SCHEMA evertalk FROM {}").format(role))
        for table, rights in TABLE_GRANTS.items():
            if rights:
                conn.execute(
                    sql.SQL(f"GRANT {rights} ON {{}} TO {{}}").format(
                        sql.Identifier("evertalk", table), role
                    )
                )
        conn.execute(
            sql.SQL("GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA evertalk TO {}").format(role)
        )


_KINDS = ("TABLES", "SEQUENCES", "FUNCTIONS")


def _one(conn: Connection, query: str, *args: object) -> object:
    row = conn.execute(query, args or None).fetchone()
    return row[0] if row is not None else None
