"""`evertalk store push URL` and `evertalk store pull URL DIR`: copy the chat into a PostgreSQL
database and back (SPEC §13: nothing locks a user in). `evertalk store init URL` makes a
database ready for several people (pgstore/store_init.py).

`push` copies the home's file chat into the database chat at URL, from where the database's
copy stands: run again, it copies what was logged since, or nothing. It opens the file chat
read-only, so a service running on it meanwhile goes on undisturbed. Once the copy is done, it
sets `[store] url = URL` in the home's config.toml, so that the home uses the database; a home
set to another database is refused before anything is copied (its files may be behind that
database's chat). `pull` writes the database chat into the `chat/` folder of a new home.

Whatever is printed names the database by its URL without the password. `cli` imports this
module to build its parser, so psycopg is loaded only inside the commands themselves.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evertalk.terminal_text import escape_controls, fail

if TYPE_CHECKING:
    from evertalk.pgstore.pgchat import PgChat
    from evertalk.pgstore.transfer import Copied

CHAT_NAME = "main"
"""The database chat a push writes and a pull reads."""

WORDS = {"messages": "messages", "nodes": "summaries"}
"""What the progress and the final lines call each stage of a transfer."""

BAR_WIDTH = 24


class _Refused(Exception):
    """One line for the user; the command exits 1."""


def add_parser(commands: Any) -> None:
    """`store push|pull` among evertalk's commands (`commands`: the subparsers of
    `cli.build_parser`, whose parser class gives each action `--home` too)."""
    store = commands.add_parser(
        "store", help="copy the chat into a PostgreSQL database (push) and back (pull)"
    )
    actions = store.add_subparsers(dest="action", parser_class=type(store))
    push = actions.add_parser(
        "push",
        help="copy the home's chat, or what the database lacks of it, into the database at URL, "
        "and have the home use it ([store] url)",
    )
    push.add_argument("url", metavar="URL", help="postgresql://[USER[:PASSWORD]@]HOST[:PORT]/DB")
    pull = actions.add_parser("pull", help="write the database's chat into a new home DIR")
    pull.add_argument("url", metavar="URL", help="postgresql://[USER[:PASSWORD]@]HOST[:PORT]/DB")
    pull.add_argument("dir", type=Path, metavar="DIR", help="the new home (its chat/ is written)")
    init = actions.add_parser(
        "init",
        help="ready the database at URL for several people (run by its administrator): the schema "
        "owned by a role no one logs in as, and each person's role granted what evertalk needs",
    )
    init.add_argument("url", metavar="URL", help="postgresql://[USER[:PASSWORD]@]HOST[:PORT]/DB")
    init.add_argument(
        "--owner",
        metavar="ROLE",
        default="evertalk_owner",
        help="the schema's owner, made without login if missing (default: evertalk_owner)",
    )
    init.add_argument(
        "--grant",
        metavar="ROLE",
        nargs="+",
        action="extend",
        default=[],
        help="the roles people log in as (those granted before keep their rights)",
    )


def run_store(args: argparse.Namespace, home: Path) -> int:
    """`store push` (the chat of `home`) or `store pull` (into DIR); the exit status."""
    try:
        if args.action == "push":
            return _push(home, args.url)
        if args.action == "init":
            return _init(args.url, args.owner, args.grant)
        return _pull(args.url, args.dir.expanduser() / "chat")
    except _Refused as error:
        return fail(str(error))
    except KeyboardInterrupt:  # before the copy began (a copy stopped says so itself)
        return fail("stopped before anything was copied", 130)


# Push


def _push(home: Path, url: str) -> int:
    from evertalk.pgstore.transfer import push

    where = _shown(url)
    chat_dir = home / "chat"
    if not (chat_dir / "main").is_dir():
        raise _Refused(f"no chat in {chat_dir} to push (set --home or EVERTALK_HOME)")
    _check_store_setting(home, url, where)
    progress = _Progress()
    with _database(url, create=True) as chat:
        try:
            copied = push(chat_dir, chat, progress=progress)
            total = chat.message_count
        except KeyboardInterrupt:
            progress.end()
            done = progress.done.get("messages")
            held = f" ({done:,} messages are in the database)" if done is not None else ""
            return fail(
                f"stopped{held}: running the same command again goes on where it stopped", 130
            )
        except _errors() as error:
            progress.end()
            raise _Refused(_why(error, url)) from None
        progress.end()
    if _anything(copied):
        _say(f"copied {_counts(copied)} to {where}")
    else:
        _say(f"nothing to copy: {where} holds all {total:,} messages of this chat already")
    _say(f"this home now uses {where}: {_point_at(home, url)}")
    return 0


def _check_store_setting(home: Path, url: str, where: str) -> None:
    """Refuse, before anything is copied, a URL the setting would not take, and a home whose
    config.toml is unusable or set to another database (its files may be behind that
    database's chat)."""
    from evertalk.config import ConfigError, config_path, load_config
    from evertalk.config_schema import SettingProblem, check_setting
    from evertalk.pgstore.url import shown

    try:
        check_setting("store.url", url)  # what the file may hold: no space in it, say
        current = load_config(home).store_url
    except SettingProblem as problem:
        raise _Refused(problem.line("URL")) from None
    except ConfigError as error:  # one line that holds no secret
        raise _Refused(str(error)) from None
    # the same database, whatever the password said: the URL given replaces the file's
    if current is not None and shown(current) != where:
        raise _Refused(
            f"this home uses {shown(current)} ([store] url in {config_path(home)}): "
            f"remove that line to push to {where}"
        )


def _point_at(home: Path, url: str) -> str:
    """Set `[store] url` in the home's config.toml (the rest of the file kept); what was
    changed, as it may be printed."""
    from evertalk.config import ConfigError, config_path, save_store_url

    try:
        save_store_url(home, url)
    except ConfigError as error:
        raise _Refused(f"copied, but the home was not set to use the database: {error}") from None
    return f"[store] url in {config_path(home)}"


# Pull


def _pull(url: str, chat_dir: Path) -> int:
    from evertalk.pgstore.transfer import pull

    where = _shown(url)
    _check_new(chat_dir)
    progress = _Progress()
    with _database(url, create=False) as chat:
        try:
            copied = pull(chat, chat_dir, progress=progress)
        except KeyboardInterrupt:
            progress.end()
            _remove_part(chat_dir)
            return fail(
                f"stopped, and the part written to {chat_dir} was removed: running the same"
                " command again copies the chat from the start",
                130,
            )
        except _errors(OSError) as error:
            progress.end()
            _remove_part(chat_dir)
            raise _Refused(_why(error, url)) from None
        progress.end()
    _say(f"wrote {_counts(copied)} from {where} into {chat_dir}")
    _say(f"`evertalk --home {chat_dir.parent}` opens it")
    return 0


def _check_new(chat_dir: Path) -> None:
    """Refuse a DIR whose chat/ holds anything: a pull writes a new chat, never over one."""
    try:
        if chat_dir.parent.exists() and not chat_dir.parent.is_dir():
            raise _Refused(f"{chat_dir.parent} is not a folder")
        if chat_dir.exists() and (not chat_dir.is_dir() or any(chat_dir.iterdir())):
            raise _Refused(f"{chat_dir} is not empty: store pull writes a new chat")
    except OSError as error:
        raise _Refused(f"cannot use {chat_dir}: {error.strerror or error}") from None


def _remove_part(chat_dir: Path) -> None:
    """A pull that did not finish leaves no part of a chat behind (the folder was missing or
    empty before it, `_check_new`), so that the same command can be run again."""
    import shutil  # not at the top: every command loads this module (see cli.py's _Formatter)

    shutil.rmtree(chat_dir, ignore_errors=True)


# Init


def _init(url: str, owner: str, people: list[str]) -> int:
    from evertalk.pgstore.connect import open_connection
    from evertalk.pgstore.schema import KNOWN
    from evertalk.pgstore.store_init import init_store

    where = _shown(url)
    try:
        conn = open_connection(url)
        try:
            done = init_store(conn, where, owner, people)
        finally:
            conn.close()
    except _errors() as error:
        raise _Refused(_why(error, url)) from None
    if done.made_owner:
        _say(f"made the role {owner}, which no one can log in as, to own evertalk's schema")
    brought = f", brought up by {_plural(done.migrations, 'migration')}" if done.migrations else ""
    _say(f"evertalk's schema at {where} is at version {KNOWN}, owned by {owner}{brought}")
    if done.people:
        _say(f"may use it, each seeing only their own chats: {', '.join(done.people)}")
    else:
        _say("no role may use it yet: --grant ROLE gives a person's role what evertalk needs")
    return 0


# The database


def _shown(url: str) -> str:
    """The URL as it may be printed; refused unless it is a postgresql:// URL."""
    from evertalk.pgstore.url import parse_url

    try:
        return parse_url(url).shown
    except ValueError as error:  # its message holds nothing of the URL
        raise _Refused(str(error)) from None


@contextmanager
def _database(url: str, *, create: bool) -> Iterator[PgChat]:
    """The chat of the database at `url` (made there when `create`), over a connection that
    is closed at the end."""
    import socket

    from evertalk.pgstore.connect import connect
    from evertalk.pgstore.pgchat import PgChat

    try:
        conn = connect(url)  # its errors name the database (host, port, name)
    except _errors() as error:
        raise _Refused(_why(error, url)) from None
    try:
        chat = PgChat.open(conn, CHAT_NAME, machine=socket.gethostname(), create=create)
    except BaseException as error:
        conn.close()
        if isinstance(error, _errors()):
            raise _Refused(f"{_shown(url)}: {_why(error, url)}") from None
        raise
    try:
        yield chat
    finally:
        conn.close()


def _errors(*more: type[Exception]) -> tuple[type[Exception], ...]:
    """What a failure of the transfer is raised as: the stores' own errors and a driver error
    that escaped their wrapping (and `more`)."""
    import psycopg

    from evertalk.store.errors import StoreError

    return (StoreError, psycopg.Error, *more)


def _why(error: BaseException, url: str) -> str:
    """The error's first line, without the URL's password should it hold it."""
    from evertalk.pgstore.connect import one_line

    return one_line(error, url)


# What is printed


class _Progress:
    """A transfer's progress on standard error: one line per stage, redrawn as it goes, when
    standard error is a terminal; nothing otherwise (the final lines say what was done)."""

    def __init__(self) -> None:
        try:
            self.tty = sys.stderr.isatty()
        except (AttributeError, ValueError):
            self.tty = False
        self.stage: str | None = None  # the stage whose line stands unfinished
        self.done: dict[str, int] = {}

    def __call__(self, stage: str, done: int, total: int) -> None:
        self.done[stage] = done
        if not self.tty:
            return
        if self.stage is not None and stage != self.stage:
            print(file=sys.stderr)
        self.stage = stage
        filled = BAR_WIDTH * done // total if total else BAR_WIDTH
        bar = "#" * filled + "-" * (BAR_WIDTH - filled)
        line = f"[{bar}] {WORDS.get(stage, stage)} {done:,}/{total:,}"
        print(f"\r\x1b[K{line}", end="", file=sys.stderr, flush=True)

    def end(self) -> None:
        """End the line that stands unfinished, if any."""
        if self.stage is not None:
            print(file=sys.stderr, flush=True)
            self.stage = None


def _anything(copied: Copied) -> bool:
    return bool(copied.messages or copied.nodes or copied.views)


def _counts(copied: Copied) -> str:
    """`10,000 messages, 9,990 summaries and the views`: what was copied, nothing said of what
    was not."""
    parts = []
    if copied.messages:
        parts.append(_plural(copied.messages, "message"))
    if copied.nodes:
        parts.append(_plural(copied.nodes, "summary", "summaries"))
    if copied.views:
        parts.append("the views")
    if not parts:
        return "no message"
    return parts[0] if len(parts) == 1 else f"{', '.join(parts[:-1])} and {parts[-1]}"


def _plural(count: int, one: str, many: str | None = None) -> str:
    return f"{count:,} {one if count == 1 else many or one + 's'}"


def _say(text: str) -> None:
    print(escape_controls(text), flush=True)
