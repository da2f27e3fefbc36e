"""Search over a chat: the index caught up, the query run, each hit placed in the view.

Used by `evertalk memory search`, by `/memory search` (in the service) and by the `search` tool.
Each hit names what to open with zoom: the message (`id+1`) or summary (`id+n`) found, and the
view line that covers it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from evertalk.chat import Chat
from evertalk.memory.nodes import Node, node_name
from evertalk.memory.text import flatten
from evertalk.search.query import Where, covering, lines_text, tiers, tokens, where
from evertalk.store.search_index import CANDIDATES, Report, SearchIndex
from evertalk.store.sqlite_lib import sqlite3

OWN_MOST = 100
"""Hits asked for beyond the limit, at most, to make up for those of the running turn."""

LIVE_BACKLOG = 20_000
"""Messages an index may be behind for a search inside the service (the `search` tool,
`/memory search`) to catch it up first: that runs between the service's other work, and a
bigger backlog is `evertalk memory search`'s to build, with its progress shown."""


class SearchBehind(Exception):
    """The index is too far behind to catch up here; the message says what to run."""


@dataclass(frozen=True)
class SearchHit:
    where: Where
    kind: str
    date: str
    """The message's date; for a summary, its newest message's."""
    snippet: str
    """One line, the words found between « and »."""
    lines: list[Node]
    """The view lines the hit falls in."""

    def header(self) -> str:
        kind = f"summary (level {self.where.node[0]})" if self.where.summary else self.kind
        return f"{self.where.name}  {kind}  {self.date}  {lines_text(self.lines)}"

    def text(self) -> str:
        return f"{self.header()}\n  {self.snippet}"

    def as_json(self) -> dict[str, object]:
        return {
            "id": self.where.start,
            "n": self.where.count,
            "summary": self.where.summary,
            "kind": self.kind,
            "date": self.date,
            "snippet": self.snippet,
            "view_lines": [node_name(node) for node in self.lines],
        }


@dataclass(frozen=True)
class SearchResult:
    query: str
    hits: list[SearchHit]
    capped: bool

    def text(self) -> str:
        """The hits, one entry each, or a line saying there are none."""
        if not self.hits:
            return f"no hits for {self.query!r}"
        entries = [hit.text() for hit in self.hits]
        if self.capped:
            entries.append(
                f"(the newest {CANDIDATES:,} matches were ranked: more words or a rarer one "
                "reach older ones)"
            )
        return "\n".join(entries)


@contextmanager
def search_index(chat: Chat) -> Iterator[SearchIndex]:
    """The chat's own index when it keeps one up to date, else one opened for this search."""
    if chat.search is not None:
        yield chat.search
        return
    index = SearchIndex.open(chat.folder, chat.warnings)
    try:
        yield index
    finally:
        index.close()


def search(
    chat: Chat,
    index: SearchIndex,
    query: str,
    limit: int,
    *,
    report: Report | None = None,
    backlog: int | None = None,
    own_from: int | None = None,
) -> SearchResult:
    """Catch the index up, then run `query` (EmptyQuery when it holds no word). `backlog`: the
    most messages the index may be behind (else SearchBehind). `own_from`: the first message
    of the running turn (the `search` tool's): what lies from there on is left out, since the
    model has it before it, and its own call would be the best match of its own query."""
    matches = tiers(query)
    own = min(max(0, chat.t - own_from), OWN_MOST) if own_from is not None else 0
    behind = index.behind(chat.files)
    if backlog is not None and behind > backlog:
        raise SearchBehind(
            f"the search index is {behind:,} messages behind; `evertalk memory search QUERY` "
            "in a terminal builds it (about a minute per million messages)"
        )
    try:
        index.catch_up(chat.files, report)
        found = index.search(matches, tokens(query), limit + own)
    except sqlite3.DatabaseError as error:  # damaged since it was opened: once more, anew
        index.recover(error)
        index.catch_up(chat.files, report)
        found = index.search(matches, tokens(query), limit + own)
    view = chat.view_nodes()
    hits = []
    for hit in found.hits:
        place = where(hit.rowid)
        last = place.start + place.count - 1
        if last >= chat.t:  # indexed by a process that has seen more of the log than this one
            continue
        if own_from is not None and place.start >= own_from:
            continue
        lines = covering(view, place.start, place.count)
        snippet = flatten(hit.snippet)
        hits.append(SearchHit(place, hit.kind, chat.date(last), snippet, lines))
    return SearchResult(query, hits[:limit], found.capped)
