"""`evertalk memory search QUERY [--limit N] [--json]`: full-text search over the memory.

Read-only as to the chat (it opens it as `memory view` does, with a service running or not);
it catches the search index up first, which the first time on a long chat takes a while and
says so on standard error. Hits print as `id+n  kind  date  in view line id+n` and the words
around the match, control characters shown as codes (see memory_cli).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from evertalk.chat import Chat, ToolInputError
from evertalk.memory_cli import report_warnings
from evertalk.memory_search import SearchResult, search, search_index
from evertalk.search.query import words
from evertalk.store.errors import StoreError
from evertalk.store.search_index import SearchIndex
from evertalk.store_setting import files_problem
from evertalk.terminal_text import escape_controls, fail

SAID_AFTER = 20_000
"""Messages behind that make the catch-up worth announcing (about a second's work)."""
EVERY_S = 5.0


def run_search(args: argparse.Namespace, home: Path) -> int:
    query = " ".join(args.query)
    if not words(query):
        return _usage("memory search: give words to search for, e.g. memory search 'no such file'")
    if args.limit < 1:
        return _usage(f"memory search: --limit is a whole number from 1 on, not {args.limit}")
    chat_dir = home / "chat"
    problem = files_problem(home, "memory search")
    if problem is not None:
        return fail(problem)
    try:
        chat = Chat.open(chat_dir, readonly=True)
    except StoreError as error:
        return fail(str(error))
    try:
        with search_index(chat) as index:
            _announce(chat, index)
            found = search(chat, index, query, args.limit, report=Progress())
        report_warnings(chat)
    except (StoreError, ToolInputError) as error:
        report_warnings(chat)
        return fail(str(error))
    finally:
        chat.close()
    if args.json:
        print(json.dumps(as_json(found)))
    else:
        print(escape_controls(found.text()))
    return 0


def as_json(found: SearchResult) -> dict[str, object]:
    return {
        "query": found.query,
        "hits": [hit.as_json() for hit in found.hits],
        "capped": found.capped,
    }


def _announce(chat: Chat, index: SearchIndex) -> None:
    behind = index.behind(chat.files)
    if behind >= SAID_AFTER:
        _say(
            f"building the search index: {behind:,} messages and their summaries to read "
            "(about a minute per million messages; only the first search waits for it)"
        )


class Progress:
    """Says how far a long catch-up is, every few seconds, on standard error."""

    def __init__(self) -> None:
        self.started = self.said = time.monotonic()

    def __call__(self, what: str, done: int, total: int) -> None:
        now = time.monotonic()
        if now - self.said < EVERY_S:
            return
        self.said = now
        share = done / total if total else 1.0
        _say(f"search index: {what} {share:.0%} ({now - self.started:.0f} s)")


def _say(text: str) -> None:
    print(f"evertalk: {text}", file=sys.stderr, flush=True)


def _usage(message: str) -> int:
    return fail(message, 2)
