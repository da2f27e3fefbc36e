"""Who owns evertalk's schema, checked as a chat is opened (SPEC §13: several people on one
database).

The schema's owner is above row-level security: it may lift it from the tables, or add a
trigger that copies every row the tables are given. One person's own database may well be
owned by that person's role; where several people share one, the schema belongs to a role of
its own that no one logs in as (`evertalk store init`, store_init.py). So a person's evertalk
refuses to work as the owner once the database holds another role's chat, and refuses a schema
that another person's role owns before it writes anything there. A superuser is above
row-level security anyway: the administrator's schema serves everyone.
"""

from __future__ import annotations

from psycopg import sql

from evertalk.pgstore.connect import Connection
from evertalk.pgstore.errors import Refused

SEE = 'see "Several people on one database" in evertalk\'s README'

_OWNER = """
    SELECT o.rolname, o.rolcanlogin AND NOT o.rolsuper,
        o.oid = me.oid OR (NOT me.rolsuper AND pg_has_role(o.oid, 'MEMBER')),
        me.rolsuper OR me.rolbypassrls
    FROM pg_namespace AS n JOIN pg_roles AS o ON o.oid = n.nspowner
        JOIN pg_roles AS me ON me.rolname = current_user
    WHERE n.nspname = 'evertalk'
"""
"""The schema's owner; whether it is a person's role (one may log in as it, and it is no
superuser); whether this role is the owner or may act as it; whether this role is above
row-level security."""

_OTHERS = "SELECT EXISTS (SELECT FROM evertalk.chats WHERE owner <> %s)"


def check_owner(conn: Connection) -> None:
    """Refuse, in one line, a schema this role should not work in (see above)."""
    row = conn.execute(_OWNER).fetchone()
    if row is None:
        return
    owner, person, mine, above = str(row[0]), bool(row[1]), bool(row[2]), bool(row[3])
    if mine and _others_chats(conn, owner, above):
        raise Refused(
            f"refusing to work as {_me(conn)}, the owner of evertalk's schema, on a database"
            f" that holds other people's chats, which its owner can read: {SEE}"
        )
    if not mine and person and not above:
        raise Refused(
            f"evertalk's schema in this database is owned by {owner}, another person's role,"
            f" which can read every chat in it: {SEE}"
        )


def _others_chats(conn: Connection, owner: str, above: bool) -> bool:
    """Whether a chat of another role is in the database. Row-level security hides them from
    the owner too while it is forced on the table: as the owner, it is lifted in a
    transaction that is rolled back (no one sees the table meanwhile: ALTER TABLE locks it)."""
    me = _me(conn)
    if above:
        row = conn.execute(_OTHERS, (me,)).fetchone()
        return row is not None and bool(row[0])
    with conn.transaction(force_rollback=True):
        conn.execute("SET LOCAL lock_timeout = '10s'")
        conn.execute(sql.SQL("SET LOCAL ROLE {}").format(sql.Identifier(owner)))
        conn.execute("ALTER TABLE evertalk.chats NO FORCE ROW LEVEL SECURITY")
        row = conn.execute(_OTHERS, (me,)).fetchone()
    return row is not None and bool(row[0])


def _me(conn: Connection) -> str:
    row = conn.execute("SELECT current_user").fetchone()
    return str(row[0]) if row is not None else "this role"
