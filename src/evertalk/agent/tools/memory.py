"""The memory tools: `zoom(id, n)`, `zoom(name, id?)`, `date(id)` (SPEC §6.5) and, with
`[memory] search = true`, `search(query, limit?)`.

Always allowed, never asked about. Validation is exact; a refused input is an error outcome of one
line. T counts the messages logged when the call is made.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass
from pathlib import Path

from evertalk.agent.images import MEDIA_TYPES
from evertalk.agent.tools.agent import valid_name
from evertalk.agent.tools.base import (
    Args,
    RunState,
    ToolContext,
    ToolError,
    ToolOutcome,
    result,
)
from evertalk.memory.text import MESSAGE_LIMIT
from evertalk.memory_search import LIVE_BACKLOG, SearchBehind, search, search_index
from evertalk.note_lines import zoomed_message
from evertalk.providers.base import Image
from evertalk.search.query import words
from evertalk.store.days import list_day_files
from evertalk.store.jsonl import Scan
from evertalk.store.records import MessageRecord, decode_message

IMAGES_DIR = "images"

AGENT_PAGE = MESSAGE_LIMIT - len("zoom: ")
"""How long a page of a subagent's log may be, so that its echo is one unclipped message."""


def parse_zoom(tool_input: object) -> ZoomNode | ZoomAgent:
    args = Args("zoom", tool_input, ("id", "n", "name"))
    if args.has("name"):
        if args.has("n"):
            raise ToolError("pass id and n, or name (and maybe id), not both")
        name = args.string("name")
        start = args.optional_integer("id", 0)
        return ZoomAgent(name, start)
    if args.has("n"):
        if not args.has("id"):
            raise ToolError("zoom needs id with n")
        return ZoomNode(args.integer("id"), args.integer("n"))
    if args.has("id"):
        raise ToolError("zoom needs n with id (or name, to read a subagent's log)")
    raise ToolError("zoom takes id and n, or name")


def parse_date(tool_input: object) -> DateCall:
    return DateCall(Args("date", tool_input, ("id",)).integer("id"))


SEARCH_LIMIT = 50
"""Hits a search may return: with their snippets, a few thousand characters."""


def parse_search(tool_input: object) -> SearchCall:
    args = Args("search", tool_input, ("query", "limit"))
    query = args.string("query")
    if not words(query):
        raise ToolError("`query` needs a word to search for (letters or digits)")
    limit = args.optional_integer("limit", 10)
    if not 1 <= limit <= SEARCH_LIMIT:
        raise ToolError(f"`limit` must be from 1 to {SEARCH_LIMIT}, not {limit}")
    return SearchCall(query, limit)


@dataclass(frozen=True)
class ZoomNode:
    start: int
    count: int

    async def run(self, ctx: ToolContext, limit: int, state: RunState) -> ToolOutcome:
        chat = ctx.chat
        await chat.aread_zoom(self.start, self.count)  # a chat in a database reads it ahead
        text = chat.zoom(self.start, self.count)  # validates; ToolInputError for a refusal
        if self.count > 1:
            return result(text)
        names = chat.record(self.start).images or ()
        shown, problems = load_images(chat.folder / IMAGES_DIR, names)
        if problems:
            text = "\n".join([text, *problems])
        return result(text, [image for _, image in shown], tuple(name for name, _ in shown))


@dataclass(frozen=True)
class ZoomAgent:
    name: str
    start: int

    async def run(self, ctx: ToolContext, limit: int, state: RunState) -> ToolOutcome:
        folder = agent_folder(ctx.agents_dir, self.name)
        if folder is None:
            raise ToolError(f"there is no subagent named {self.name!r}")
        name = folder.name  # as it was started, whatever the case asked for
        records = read_agent_log(folder)
        count = records[-1].i + 1 if records else 0
        if count == 0 and self.start == 0:
            return result(f"{name} has logged no messages yet")
        if not 0 <= self.start < count:
            last = f"between 0 and {count - 1}" if count else "0"
            raise ToolError(f"id must be {last} for {name}, not {self.start}")
        return result(agent_page(name, [r for r in records if r.i >= self.start]))


@dataclass(frozen=True)
class DateCall:
    id: int

    async def run(self, ctx: ToolContext, limit: int, state: RunState) -> ToolOutcome:
        await ctx.chat.aread_records(self.id, self.id + 1)  # as zoom's
        return result(ctx.chat.date(self.id))  # validates 0 <= id < T


@dataclass(frozen=True)
class SearchCall:
    query: str
    limit: int

    async def run(self, ctx: ToolContext, limit: int, state: RunState) -> ToolOutcome:
        chat = ctx.chat
        if not chat.search_enabled:  # not offered: the model named it anyway
            raise ToolError("search is off in this chat ([memory] search in config.toml)")
        with search_index(chat) as index:
            try:
                found = search(
                    chat,
                    index,
                    self.query,
                    self.limit,
                    backlog=LIVE_BACKLOG,
                    own_from=ctx.turn_from,
                )
            except SearchBehind as error:
                raise ToolError(str(error)) from None
        return result(found.text())


# -- images -------------------------------------------------------------------------------------


def load_images(folder: Path, names: tuple[str, ...]) -> tuple[list[tuple[str, Image]], list[str]]:
    """The images named, read from `folder` and base64-encoded, each with its name; and a line
    for each one that cannot be shown."""
    shown: list[tuple[str, Image]] = []
    problems: list[str] = []
    for name in names:
        media_type = MEDIA_TYPES.get(Path(name).suffix.lower())
        if "/" in name or name.startswith(".") or media_type is None:
            problems.append(f"[image {name!r} cannot be shown: not an image file name]")
            continue
        try:
            data = (folder / name).read_bytes()
        except OSError as error:
            problems.append(f"[image {name!r} cannot be shown: {error.strerror or error}]")
            continue
        shown.append((name, Image(media_type, base64.b64encode(data).decode("ascii"))))
    return shown, problems


# -- subagent logs ------------------------------------------------------------------------------


def agent_folder(agents_dir: Path, name: str) -> Path | None:
    """The folder of the subagent `name`, if there is one. Only a valid name can name one, so
    that no name reaches outside `agents_dir`. Names are unique regardless of case (the `agent`
    tool sees to it), so a name in another case finds the same subagent."""
    if not valid_name(name):
        return None
    folder = agents_dir / name
    if folder.is_dir():
        return folder
    wanted = name.casefold()
    try:
        entries = list(agents_dir.iterdir())
    except OSError:
        return None
    found = [entry for entry in entries if entry.name.casefold() == wanted and entry.is_dir()]
    return found[0] if len(found) == 1 else None


def read_agent_log(folder: Path) -> list[MessageRecord]:
    """Every message of a subagent's log, ordered by id (never by file name, SPEC §1.2).

    Torn and malformed lines are skipped (SPEC §1.4); of two records with one id the first read
    is kept.
    """
    records: dict[int, MessageRecord] = {}
    for name in list_day_files(folder):
        for line in Scan(folder / name):
            if line.record is None:
                continue
            record = decode_message(line.record)
            if record is not None:
                records.setdefault(record.i, record)
    return [records[i] for i in sorted(records)]


def agent_page(name: str, records: list[MessageRecord], budget: int = AGENT_PAGE) -> str:
    """`i|kind: text` for the whole messages that `budget` characters can hold together with the
    closing line that says where to go on (at least one message, however long), then that line
    if more remain."""
    lines: list[str] = []
    size = 0
    for index, record in enumerate(records):
        line = f"{record.i}|{zoomed_message(record.kind, record.text)}"
        grown = size + len(line) + (1 if lines else 0)
        rest = records[index + 1 :]
        closing = len(next_line(name, rest[0].i, len(rest))) + 1 if rest else 0
        if lines and grown + closing > budget:
            break
        lines.append(line)
        size = grown
    rest = records[len(lines) :]
    if rest:
        lines.append(next_line(name, rest[0].i, len(rest)))
    return "\n".join(lines)


def next_line(name: str, start: int, remaining: int) -> str:
    noun = "message remains" if remaining == 1 else "messages remain"
    return f'[{remaining} more {noun}: zoom(name="{name}", id={start}) reads on]'
