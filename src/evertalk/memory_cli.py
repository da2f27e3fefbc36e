"""`evertalk memory status | view | zoom | date`: read-only looks at any chat directory.

What they print goes through `escape_controls`, whether or not it goes to a terminal: a message
holding an escape sequence shows it as `\\x1b[…` rather than clearing the screen, and a program
reading the output gets the same text a person sees (the log keeps the message as it was).
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path
from typing import TextIO

from evertalk.chat import Chat, Status, ToolInputError
from evertalk.store.compactor_status import CompactorStatus, catch_up_seconds, read_status
from evertalk.store.errors import StoreError
from evertalk.store_setting import database_url
from evertalk.terminal_text import counted, escape_controls


class CommandError(Exception):
    """A one-line error for the user; the command exits 1."""


def run_memory_command(args: argparse.Namespace, home: Path) -> int:
    chat_dir = home / "chat"
    try:
        url = database_url(home)
    except StoreError as error:
        return _fail(str(error))
    if url is None and not (chat_dir / "main").is_dir():
        if args.action == "status":  # a new user (or bare `evertalk` in a pipe): nothing is wrong
            return _no_chat_yet(chat_dir, as_json=getattr(args, "json", False))
        return _fail(f"no chat in {chat_dir} (set --home or EVERTALK_HOME)")
    try:
        chat = Chat.open(chat_dir, readonly=True) if url is None else _shared(home, url)
    except StoreError as error:
        return _fail(str(error))
    try:
        report_warnings(chat)
        return _run(chat, args)
    except (StoreError, ToolInputError) as error:
        return _fail(str(error))
    finally:
        chat.close()


def _shared(home: Path, url: str) -> Chat:
    """The chat of the database the home uses, read as it is now."""
    from evertalk.pgstore.session import PgSession
    from evertalk.shared_chat import SharedChat, machine_name

    session = PgSession(url, machine_name(home))
    return SharedChat.open_shared(session, home / "chat", readonly=True)


def report_warnings(chat: Chat) -> None:
    """What opening the chat repaired or skipped (torn lines, an index rebuilt), on stderr:
    the command's own output stays clean for programs."""
    for warning in chat.warnings:
        _say(f"evertalk: warning: {warning}", sys.stderr)


def _no_chat_yet(chat_dir: Path, *, as_json: bool) -> int:
    if as_json:
        print(json.dumps({"path": str(chat_dir), "exists": False, "messages": 0}))
    else:
        _say(f"No chat yet in {chat_dir}: it starts with your first message.")
    return 0


def _run(chat: Chat, args: argparse.Namespace) -> int:
    action = args.action
    if action == "status":
        status = chat.status()
        live = read_status(chat.folder)
        to_go, behind = catching_up(chat)
        eta = catch_up_seconds(to_go, live.rate if live else None)
        if getattr(args, "json", False):
            compactor = asdict(live) if live else None
            catch_up = {
                "to_go": to_go,
                "view_after_batch": chat.catch_up().view_after_batch,
                "behind": behind,
                "eta_seconds": round(eta, 2),
            }
            fields = {**asdict(status), "path": str(status.path), "nodes": node_count(status)}
            print(json.dumps({**fields, "compactor": compactor, "catch_up": catch_up}))
        else:
            _say(format_status(status))
            if behind:
                _say(format_catch_up(to_go, eta, live))
            _say(format_compactor(live))
    elif action == "view":
        _say(chat.render_view())
    elif action == "zoom":
        _say(chat.zoom(args.id, args.n))
    elif action == "date":
        _say(chat.date(args.id))
    return 0


def _say(text: str, stream: TextIO | None = None) -> None:
    """Print `text` with its control characters shown, not obeyed by the terminal. JSON needs
    none of this: `json.dumps` writes them as `\\u001b`."""
    print(escape_controls(text), file=stream or sys.stdout)


def format_status(status: Status) -> str:
    def flag(value: bool) -> str:
        return "shrinking" if value else "steady"

    last = f", last {status.last_date}" if status.last_date else ""
    return "\n".join(
        [
            f"chat      {status.path}",
            f"messages  {status.messages:,}{last}",
            f"view      {counted(status.view_lines, 'line')}, "
            f"{counted(status.view_bytes, 'byte')}, {flag(status.shrinking)}",
            f"cview     {counted(status.cview_lines, 'line')}, "
            f"{counted(status.cview_bytes, 'byte')}, {flag(status.cshrinking)}",
            format_nodes(status),
            f"ready     {counted(status.ready_leaves, 'leaf', 'leaves')}, "
            f"{counted(status.ready_merges, 'merge')}",
        ]
    )


def node_count(status: Status) -> int:
    return status.built + status.free + status.cut + status.unbuilt


def format_nodes(status: Status) -> str:
    """The tree's lines by how each came to be, in the words (and with the numbers) of the
    JSON's `nodes`, `built`, `free`, `cut` and `unbuilt`: each node is counted once, and
    `built` means written by the model, as there."""
    return (
        f"nodes     {node_count(status):,}: {status.built:,} built by the model, "
        f"{status.free:,} free (short enough to need no call), "
        f"{status.cut:,} cut (input shortened: no summary came), {status.unbuilt:,} unbuilt"
    )


def catching_up(chat: Chat) -> tuple[int, bool]:
    """The summaries still to be built before a turn's view is whole, and whether the chat is
    said to be catching up: the figure and the rule of the service's status (`Agent.status`),
    which the app and a waiting turn show, for a turn model whose window holds the view's
    ceiling. Every node not built yet is another figure, the `nodes` line's `unbuilt`."""
    to_go = chat.summaries_to_go(chat.view_ceiling)
    return to_go, bool(to_go) and chat.catch_up().behind


def format_catch_up(count: int, eta: float, live: CompactorStatus | None) -> str:
    """`catching up: 1,204 summaries to go, about 25 min`, in the words (and with the figure)
    of the app and `-p`; with no compactor running, how to start one; with one paused, no time
    (none is known)."""
    # only a chat that is behind needs these words: a status of one caught up does not load them
    from evertalk.protocol.events import CatchingUp, catching_up_text, to_go

    if live is not None and live.paused:
        return f"catching up: {to_go(count)}, paused"
    line = catching_up_text(CatchingUp(count, eta))
    return line if live is not None else f"{line} (`evertalk memory compact` builds them now)"


def format_compactor(live: CompactorStatus | None) -> str:
    if live is None:
        return "compactor not running (the chat is not open)"
    work = f"queued {live.queued}, failed {live.failed}"
    if live.paused:  # the failures are its model's, not the nodes'
        work = f"paused until its model can be used or reached, queued {live.queued}"
    line = f"compactor running in pid {live.pid}: summarizing {live.running}, {work}"
    return line + (f"; last error: {live.last_error}" if live.last_error else "")


def _fail(message: str) -> int:
    _say(f"evertalk: {message}", sys.stderr)
    return 1
