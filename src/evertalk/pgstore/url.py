"""A postgresql:// URL, read and shown without its secrets.

The URL follows libpq's conventions (SPEC §13): the password may be in it, in `~/.pgpass` or
in PGPASSWORD. Whatever is printed or logged about a database goes through `PgUrl.shown` or
`PgUrl.where`, which never hold the password.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit

SCHEMES = ("postgresql", "postgres")
_SECRET_PARAMS = frozenset({"password", "sslpassword", "passfile"})
"""Query parameters that are secrets, or say where one is: never shown."""


@dataclass(frozen=True, slots=True)
class PgUrl:
    user: str | None
    host: str
    port: int | None
    database: str
    params: tuple[tuple[str, str], ...]

    @property
    def where(self) -> str:
        """HOST/DB (with :PORT when one is given), for messages."""
        port = f":{self.port}" if self.port is not None else ""
        return f"{self.host}{port}/{self.database}"

    @property
    def shown(self) -> str:
        """The URL without its password and secret parameters."""
        user = f"{self.user}@" if self.user else ""
        kept = [(name, value) for name, value in self.params if name not in _SECRET_PARAMS]
        query = f"?{urlencode(kept)}" if kept else ""
        return f"postgresql://{user}{self.where}{query}"


def parse_url(url: str) -> PgUrl:
    """The parts of a postgresql:// URL; ValueError (whose message holds no secret) if it is
    not one."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise ValueError("not a postgresql:// URL (its host or port cannot be read)") from None
    if parts.scheme not in SCHEMES:
        raise ValueError(f"not a postgresql:// URL (its scheme is {parts.scheme!r})")
    params = tuple(parse_qsl(parts.query, keep_blank_values=True))
    # libpq takes a unix socket's folder as ?host=/path when the URL's host is empty
    host = parts.hostname or dict(params).get("host") or "localhost"
    database = unquote(parts.path.lstrip("/")) or (unquote(parts.username or "") or "postgres")
    user = unquote(parts.username) if parts.username else None
    return PgUrl(user, host, port, database, params)


def shown(url: str) -> str:
    """`url` as it may be printed: without its password, or a placeholder if it is malformed."""
    try:
        return parse_url(url).shown
    except ValueError:
        return "(a malformed postgresql:// URL)"
