"""`evertalk memory forget A[-B]` and `evertalk memory redact TEXT`: the user takes messages, or a
string, out of the whole memory (SPEC §12). The only way anything leaves it: no tool of the
model, no MCP request, no import or capture can do this.

Each shows what will change and asks first (`--yes` for scripts). When a service owns the chat
the work is its (the `forget` request); otherwise this command takes the chat's lock itself.
"""

from __future__ import annotations

import argparse
import re
from datetime import datetime
from pathlib import Path

from evertalk.chat import Chat
from evertalk.memory import node_name
from evertalk.memory.nodes import Node
from evertalk.store.chat_dir import ChatStore
from evertalk.store.checkpoint import INDEX_DIR
from evertalk.store.copies import holding
from evertalk.store.errors import StoreError
from evertalk.store.finder import Finder
from evertalk.store.forget import Plan, apply, marker, plan_edit, plan_forget
from evertalk.store.search_index import SEARCH_NAME
from evertalk.store_setting import files_problem
from evertalk.summary_cost import summary_calls
from evertalk.terminal_text import confirmed, counted, escape_controls, fail

UNREACHED = (
    "Not reached: files written by `evertalk memory browse --out`, backups and copies made "
    "outside evertalk, and the provider's prompt cache, which keeps what it was sent for its "
    "lifetime (5 minutes to an hour)."
)

CACHE_AGAIN = "the next turn writes the prompt cache again from the first changed line."
FORGET_QUESTION = "Forget this for good?"
NOTHING = "Nothing to forget: no message, summary or other file under the home holds it."


class ForgetError(Exception):
    """A one-line error for the user; the command exits 1."""


def parse_range(words: str) -> tuple[int, int]:
    """`12` or `12-15`: the first and last id."""
    match = re.fullmatch(r"\s*(\d+)\s*(?:-\s*(\d+)\s*)?", words)
    if match is None:
        raise ForgetError(f"not a message id or a range A-B: {words!r}")
    first = int(match.group(1))
    last = int(match.group(2)) if match.group(2) is not None else first
    if last < first:
        raise ForgetError(f"the range {words} ends before it starts")
    return first, last


def today() -> str:
    return datetime.now().astimezone().strftime("%Y-%m-%d")


def forget_plan(store: ChatStore, first: int, last: int, reason: str | None) -> Plan:
    return plan_forget(store, first, last, marker(today(), reason))


def redact_plan(store: ChatStore, text: str, *, regex: bool) -> Plan:
    """Every message and built summary whose text holds `text` (or matches it as a regular
    expression), each occurrence to be replaced by `[redacted]`: in any escaping, inside a tool
    call's input, across the pages of a long message (see store/finder.py)."""
    finder = finder_of(text, regex=regex)
    messages = (store.read_message(i) for i in range(store.message_count))
    nodes: list[Node] = []
    for level, row in enumerate(store.node_flags()):
        for index, flag in enumerate(row):
            record = store.read_node(level, index) if flag else None
            if record is not None and finder.holds(record.text):
                nodes.append((level, index))
    return plan_edit(store, messages, nodes, finder)


def finder_of(text: str, *, regex: bool) -> Finder:
    """What finds `text` (or the matches of it); a plain string's reversed, hex and base64
    forms too, as for known keys (see redaction.py)."""
    if not text:
        raise ForgetError("there is nothing to redact in an empty string")
    if not regex:
        return Finder.text(text)
    try:
        pattern = re.compile(text)
    except re.error as error:
        raise ForgetError(f"not a regular expression: {error}") from None
    if pattern.search(""):
        raise ForgetError("the expression matches the empty string: it would match anywhere")
    return Finder.regex(text)


Places = list[tuple[str, list[Path]]]
"""The other places under the home that hold the text, each with its files (copies.holding)."""


def places_of(plan: Plan, chat_dir: Path) -> Places:
    return holding(chat_dir.parent, plan.scrub)


def nothing(plan: Plan, places: Places) -> bool:
    """Whether no message, summary or other place holds the text."""
    return not plan.changes and not plan.dropped and not places


def describe(plan: Plan, chat_dir: Path, places: Places) -> list[str]:
    """The preview: what changes, each other place that holds the text, what is out of reach,
    what it costs."""
    ids = sorted(plan.changes)
    lines = [f"Messages that change: {_ids(ids)}" if ids else "No message changes."]
    for i in ids[:5]:
        before = plan.changes[i].before
        lines.append(f"  {i} {before.kind}: {_short(before.text)}")
    if len(ids) > 5:
        lines.append(f"  … and {len(ids) - 5} more")
    if plan.images:
        lines.append(f"Images that go with them: {len(plan.images)}")
    names = ", ".join(node_name(node) for node in plan.dropped[:8])
    more = f" and {len(plan.dropped) - 8} more" if len(plan.dropped) > 8 else ""
    lines.append(f"Summaries that lose their text and are built again: {len(plan.dropped)}")
    if plan.dropped:
        lines.append(f"  {names}{more}")
    if (chat_dir / INDEX_DIR / SEARCH_NAME).is_file():  # search is on: its rows change too
        lines.append(
            f"Search index: about {counted(plan.search_rows, 'row')} change or go, and none of "
            "its files keeps their old words"
        )
    lines += _places(chat_dir.parent, places)
    lines.append(f"Cost: {_cost(chat_dir.parent, plan.calls)}; {CACHE_AGAIN}")
    lines.append(UNREACHED)
    return lines


def _cost(home: Path, nodes: int) -> str:
    """What building the summaries again costs, as the preview says it."""
    calls, dollars = summary_calls(home, nodes)
    if not calls:
        return "no model calls"
    price = "price unknown" if dollars is None else f"about ${dollars:,.2f}"
    if dollars is not None and dollars < 0.005:
        price = "under $0.01"
    return f"about {counted(calls, 'model call')} of the compactor ({price}) to build them again"


def _places(home: Path, found: Places) -> list[str]:
    if not found:
        return []
    lines = ["Other places under the home that hold it (rewritten without it, or removed):"]
    for what, paths in found:
        shown = ", ".join(str(path.relative_to(home)) for path in paths[:3])
        more = f" and {len(paths) - 3} more" if len(paths) > 3 else ""
        lines.append(f"  {what}: {shown}{more}")
    if any(what == "undo checkpoints" for what, _ in found):
        lines.append("  (undo refuses a file whose saved content held it: that content goes)")
    return lines


def run_forget(args: argparse.Namespace, home: Path) -> int:
    """`memory forget` (args.range, args.reason) or `memory redact` (args.text, args.regex)."""
    chat_dir = home / "chat"
    problem = files_problem(home, "memory forget")
    if problem is not None:
        return fail(problem)
    from evertalk.client.connection import ServiceError, running

    try:
        if running(home):
            return _via_service(args, home)
        return _run(args, chat_dir)
    except (ForgetError, StoreError, ServiceError) as error:
        return fail(str(error))


def _via_service(args: argparse.Namespace, home: Path) -> int:
    """The service owns the files: it plans, shows, and on the user's yes applies."""
    from msgspec.structs import replace

    from evertalk.client.connection import connect
    from evertalk.protocol.replies import ForgetPreview, Forgotten
    from evertalk.protocol.requests import Forget

    if args.action == "redact":
        request = Forget(redact=args.text, regex=args.regex)
    else:
        parse_range(args.range)  # a bad range is this command's one line, before any request
        request = Forget(range=args.range, reason=args.reason)
    with connect(home, "forget") as connection:
        preview = connection.request(replace(request, preview=True), ForgetPreview)
        if not preview.changes:
            _say(NOTHING)
            return 0
        for line in preview.lines:
            _say(line)
        if not args.yes and not confirmed(FORGET_QUESTION):
            _say("Nothing was changed.")
            return 1
        done = connection.request(request, Forgotten)
    dropped = counted(done.summaries, "summary", "summaries")
    _say(
        f"Done: {counted(done.messages, 'message')} changed, {dropped} dropped; the service "
        "builds them again."
    )
    return 0


def _run(args: argparse.Namespace, chat_dir: Path) -> int:
    chat = Chat.open(chat_dir)
    try:
        plan = _plan(args, chat.files)
        places = places_of(plan, chat_dir)
        if nothing(plan, places):
            _say(NOTHING)
            return 0
        for line in describe(plan, chat_dir, places):
            _say(line)
        if not args.yes and not confirmed(FORGET_QUESTION):
            _say("Nothing was changed.")
            return 1
        apply(chat.files, plan)
    finally:
        chat.close()  # the store is invalidated once applied: the views are not saved over
    with Chat.open(chat_dir) as chat:
        to_go = chat.unbuilt_count()
    changed = counted(len(plan.changes), "message")
    dropped = counted(len(plan.dropped), "summary", "summaries")
    waiting = f"{counted(to_go, 'summary', 'summaries')} {'waits' if to_go == 1 else 'wait'}"
    _say(
        f"Done: {changed} changed, {dropped} dropped; {waiting} for the compactor "
        "(`evertalk memory compact` builds them now)."
    )
    return 0


def _plan(args: argparse.Namespace, store: ChatStore) -> Plan:
    if args.action == "redact":
        return redact_plan(store, args.text, regex=args.regex)
    first, last = parse_range(args.range)
    return forget_plan(store, first, last, args.reason)


def _ids(ids: list[int]) -> str:
    if ids == list(range(ids[0], ids[-1] + 1)):
        return str(ids[0]) if len(ids) == 1 else f"{ids[0]}–{ids[-1]}"
    return ", ".join(str(i) for i in ids[:20]) + (" …" if len(ids) > 20 else "")


def _short(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= 70 else flat[:69] + "…"


def _say(text: str) -> None:
    print(escape_controls(text))
