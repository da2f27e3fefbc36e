"""What ChatGPT's web search and browsing leave in an export: results in a tool message's
metadata, and citation marks in the replies that use them.

A search (`web.run`, `web`, `browser`) answers with a tool message whose text is often empty;
its results are in the metadata: `search_result_groups` (2024 on: groups of entries with
`title`, `url`, `snippet` and `ref_id`, `{turn_index, ref_type, ref_index}`) or `_cite_metadata`
(2023: a `metadata_list` of pages with `title`, `url`, `text`). One with neither says what it
searched for: the queries in its metadata (`search_queries`, `[{type, q}]`), or in the call it
answers (an assistant message to the tool, `{"search_query": [{"q": …}]}`). A reply cites them
with marks between private-use characters, `\\ue200cite\\ue202turn0search4\\ue201` (and
`entity`, `filecite`, … of the same form); its `content_references` give the link the app shows
for each (`alt`). A mark becomes that link, or one made from the results it names; an `entity`
its name; any other is removed.
"""

from __future__ import annotations

import json
import re
from typing import Any

from evertalk.importers.common import string

Sources = dict[str, tuple[str, str]]
"""A result's reference (`turn0search4`) → its (title, address), as the conversation went."""

_MARK = re.compile(r"(\s?)\ue200([^\ue200-\ue202]*)((?:\ue202[^\ue200\ue201]*)*)\ue201")
_STRAY = re.compile(r"[\ue200-\ue202]")


def search_results(metadata: dict[str, Any], sources: Sources) -> str:
    """The results a tool message's metadata holds, a title and address, then a snippet, each;
    remembered in `sources` by their reference."""
    found: list[str] = []
    groups = metadata.get("search_result_groups")
    for group in groups if isinstance(groups, list) else ():
        entries = group.get("entries") if isinstance(group, dict) else None
        for entry in entries if isinstance(entries, list) else ():
            if isinstance(entry, dict):
                found += _result(entry, string(entry.get("snippet")), sources)
    cite = metadata.get("_cite_metadata")
    pages = cite.get("metadata_list") if isinstance(cite, dict) else None
    for page in pages if isinstance(pages, list) else ():
        if isinstance(page, dict):
            found += _result(page, string(page.get("text")), sources)
    return "\n\n".join(found)


def searched(metadata: dict[str, Any], asked: list[str]) -> str:
    """What a search's tool message with no results says: `searched: q1; q2`, the queries of
    its metadata, else `asked` (its call's); "" when none is named."""
    listed = metadata.get("search_queries")
    queries = _queries(listed) or asked
    return f"searched: {'; '.join(queries)}" if queries else ""


def call_queries(text: str) -> list[str]:
    """The queries of a call to a search tool, from its JSON (`search_query`); none if other."""
    try:
        call = json.loads(text)
    except (ValueError, RecursionError):
        return []
    return _queries(call.get("search_query")) if isinstance(call, dict) else []


def _queries(listed: object) -> list[str]:
    queries = []
    for query in listed if isinstance(listed, list) else ():
        said = string(query.get("q")) if isinstance(query, dict) else None
        if said and said.strip():
            queries.append(" ".join(said.split()))
    return queries


def _result(entry: dict[str, Any], snippet: str | None, sources: Sources) -> list[str]:
    title, url = string(entry.get("title")) or "", string(entry.get("url")) or ""
    if not title and not url:
        return []
    reference = entry.get("ref_id")
    if isinstance(reference, dict):
        name = "turn{}{}{}".format(
            reference.get("turn_index"), reference.get("ref_type"), reference.get("ref_index")
        )
        sources[name] = (title or url, url)
    heading = f"{title} {url}".strip()
    return [f"{heading}\n{snippet.strip()}" if snippet and snippet.strip() else heading]


def cited(text: str, metadata: dict[str, Any], sources: Sources) -> str:
    """A reply with each citation mark made the link to what it cites, or removed."""
    if "\ue200" not in text and "\ue201" not in text:
        return text
    links = _references(metadata)

    def replace(mark: re.Match[str]) -> str:
        space, kind, rest = mark.groups()
        link = links.get(mark.group(0).lstrip()) or _link(kind, rest, sources)
        return f"{space}{link}" if link else ""

    return _STRAY.sub("", _MARK.sub(replace, text))


def _references(metadata: dict[str, Any]) -> dict[str, str]:
    """Each mark the reply's `content_references` explain → the link shown for it."""
    links: dict[str, str] = {}
    references = metadata.get("content_references")
    for reference in references if isinstance(references, list) else ():
        if not isinstance(reference, dict):
            continue
        matched, alt = string(reference.get("matched_text")), string(reference.get("alt"))
        if matched and alt and alt.strip():
            links[matched] = alt.strip()
    return links


def _link(kind: str, rest: str, sources: Sources) -> str:
    parts = [part for part in rest.split("\ue202") if part]
    if kind == "entity" and parts:
        try:
            entity = json.loads(parts[0])
        except (ValueError, RecursionError):
            return ""
        name = entity[1] if isinstance(entity, list) and len(entity) > 1 else None
        return name if isinstance(name, str) else ""
    if kind != "cite":
        return ""
    named = [sources[part] for part in parts if part in sources]
    if not named:
        return ""
    return "(" + ", ".join(f"[{title}]({url})" if url else title for title, url in named) + ")"
