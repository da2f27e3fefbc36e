"""Whether a home keeps its chat in a database (`[store] url`), for the commands that read the
chat themselves rather than through the service.

A home without a `[store]` table in its config.toml keeps its chat in files, and that is seen
without loading the settings' module: a read-only command of such a home (`memory status`)
loads nothing more than it did.
"""

from __future__ import annotations

import re
from pathlib import Path

from evertalk.store.errors import StoreError

_STORE_TABLE = re.compile(rb"^[ \t]*(\[[ \t]*store[ \t]*\]|store[ \t]*\.)", re.MULTILINE)


def database_url(home: Path) -> str | None:
    """The database the home's chat is kept in, or None for its files; a StoreError (one
    line) when config.toml cannot be read as settings."""
    try:
        raw = (home / "config.toml").read_bytes()
    except OSError:
        return None
    if not _STORE_TABLE.search(raw):
        return None
    from evertalk.config import ConfigError, load_config

    try:
        return load_config(home).store_url
    except ConfigError as error:
        raise StoreError(str(error)) from None


def files_only(home: Path, what: str) -> str | None:
    """Why `what` cannot run on this home (its chat is in a database), or None."""
    url = database_url(home)
    if url is None:
        return None
    from evertalk.pgstore.url import parse_url

    return (
        f"{what} works on a chat kept in files; this home keeps its chat in the database at"
        f" {parse_url(url).where} (`evertalk store pull` brings it back to files)"
    )


def files_problem(home: Path, what: str) -> str | None:
    """Why `what`, which reads the chat's files, cannot run on this home: its chat is in a
    database, or there is no chat yet; None when it can."""
    try:
        why = files_only(home, what)
    except StoreError as error:
        return str(error)
    chat_dir = home / "chat"
    if why is None and not (chat_dir / "main").is_dir():
        why = f"no chat in {chat_dir} (set --home or EVERTALK_HOME)"
    return why
