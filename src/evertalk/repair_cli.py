"""`evertalk memory repair`: put a note in place of each message the log cannot read, then open
the chat to show that it works again.

The repair must own the chat's files, so a running service is stopped first; the hold on the
service (`service_hold.py`) keeps every open window and `-p` from starting another until the
repair ends."""

from __future__ import annotations

import sys
import time
from pathlib import Path

from evertalk.client.connection import ServiceError, take_over
from evertalk.service_hold import Held, holding
from evertalk.store.repair import Fixed, Report, needs_repair, repair
from evertalk.store_setting import files_problem
from evertalk.terminal_text import counted

WHAT = "memory repair"
LOCK_WAIT = 3.0
"""Seconds the repair waits for a service that opened the chat as it took the hold."""


def run_repair(home: Path) -> int:
    chat_dir = home / "chat"
    problem = files_problem(home, "repair")
    if problem is not None:
        print(f"evertalk: {problem}", file=sys.stderr)
        return 1
    if not _needs_repair(chat_dir):  # then no service or window is stopped for nothing
        print(describe(Report())[0])
        return 0
    try:
        with holding(home, WHAT):
            try:
                take_over(home, WHAT)
            except ServiceError as error:  # the repair says what it finds then
                print(f"evertalk: {error}", file=sys.stderr)
            return _repair(chat_dir)
    except Held as error:
        print(f"evertalk: memory repair: {error}", file=sys.stderr)
        return 1


def _needs_repair(chat_dir: Path) -> bool:
    from evertalk.store.errors import StoreError

    try:
        return needs_repair(chat_dir)
    except (StoreError, OSError):
        return True  # let the repair itself say what it cannot read


def _repair(chat_dir: Path) -> int:
    from evertalk.chat import Chat
    from evertalk.store.errors import StoreError

    try:
        report = _repair_when_free(chat_dir)
        for line in describe(report):
            print(line)
        with Chat.open(chat_dir) as chat:
            for warning in chat.warnings:
                print(f"evertalk: warning: {warning}", file=sys.stderr)
            print(f"The chat opens: {counted(chat.t, 'message')}.")
    except (StoreError, OSError) as error:
        print(f"evertalk: memory repair: {error}", file=sys.stderr)
        return 1
    return 0


def _repair_when_free(chat_dir: Path) -> Report:
    """The repair, once the chat's lock is free: a service a client started just before the
    hold was taken lets go of it as soon as it has opened the chat (it finds the hold then),
    within LOCK_WAIT seconds."""
    from evertalk.store.errors import ChatLocked

    deadline = time.monotonic() + LOCK_WAIT
    while True:
        try:
            return repair(chat_dir)
        except ChatLocked:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.1)


def describe(report: Report) -> list[str]:
    """What the repair did, a line per kind of fix and stretch of ids."""
    if not report.fixed:
        return ["Nothing to repair: every message of the log can be read."]
    lines = [_line(group) for group in _stretches(report.fixed)]
    lines.append(f"The files as they were before the repair are in {report.copies}.")
    return lines


_HOW = {
    "kept": "kept as a message of its own (a page of a long message whose other pages are lost)",
    "damaged": "damaged: a note now says so",
    "lost": "lost (no file holds it any more): a note now says so",
}


def _line(group: list[Fixed]) -> str:
    first, last = group[0], group[-1]
    ids = f"message {first.i}" if first is last else f"messages {first.i}–{last.i}"
    return f"{ids}: {_HOW[first.how]} (in {first.where})"


def _stretches(fixed: list[Fixed]) -> list[list[Fixed]]:
    """Consecutive ids fixed the same way in the same file, together."""
    groups: list[list[Fixed]] = []
    for item in fixed:
        last = groups[-1][-1] if groups else None
        same = last is not None and (last.how, last.where, last.i + 1) == (
            item.how,
            item.where,
            item.i,
        )
        if same and item.how == "lost":
            groups[-1].append(item)
        else:
            groups.append([item])
    return groups
