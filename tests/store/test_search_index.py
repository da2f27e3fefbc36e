"""The search index (`index/search.sqlite`) and the pure parts of search, on real chats.

Ranking, the covering view line, an index rebuilt after deletion or damage or a changed log, and
several processes catching one index up.
"""

from __future__ import annotations

import os
import sqlite3
import stat
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from evertalk.chat import Chat
from evertalk.memory_search import SearchResult, search
from evertalk.search.query import (
    END,
    MARK,
    EmptyQuery,
    Where,
    covering,
    lines_text,
    message_rowid,
    node_rowid,
    snippet,
    tf_score,
    tiers,
    tokens,
    where,
)
from evertalk.store import search_index
from evertalk.store.search_index import SEARCH_NAME, SearchIndex

FILLER = " ".join(["padding"] * 120)  # makes a message too long to be its own free leaf


def found(chat: Chat, query: str, limit: int = 10) -> SearchResult:
    index = SearchIndex.open(chat.store.path, chat.warnings)
    try:
        return search(chat, index, query, limit)
    finally:
        index.close()


def names(result: SearchResult) -> list[str]:
    return [hit.where.name for hit in result.hits]


# -- the pure parts ----------------------------------------------------------------------------


def test_a_row_id_says_what_it_holds_and_sorts_by_recency() -> None:
    assert where(message_rowid(7)) == Where(7, 1, summary=False)
    assert where(node_rowid(3, 5)) == Where(40, 8, summary=True)
    assert Where(40, 8, summary=True).node == (3, 5)
    # the newer a hit's last message, the larger its row id
    assert message_rowid(8) > node_rowid(3, 0) > message_rowid(6)
    assert node_rowid(0, 4) != message_rowid(4)


def test_user_text_is_quoted_word_by_word() -> None:
    assert tiers("kettle") == ['"kettle"']
    assert tiers('foo-bar "x') == ['"foo-bar ""x"', '"foo-bar" AND """x"']
    assert tiers("a OR NEAR(b") == ['"a OR NEAR(b"', '"a" AND "OR" AND "NEAR(b"']
    for empty in ("", "   ", '- " *', "()"):
        with pytest.raises(EmptyQuery):
            tiers(empty)
    assert tokens("foo-bar_baz x2") == ["foo", "bar", "baz", "x2"]


def test_the_covering_line_of_a_message_and_of_a_summary() -> None:
    view = [(3, 0), (2, 2), (1, 6), (0, 14), (0, 15)]  # 0+8, 8+4, 12+2, 14+1, 15+1
    assert covering(view, 0, 1) == [(3, 0)]
    assert covering(view, 7, 1) == [(3, 0)]
    assert covering(view, 11, 1) == [(2, 2)]
    assert covering(view, 15, 1) == [(0, 15)]
    assert covering(view, 16, 1) == []  # past the view's end
    assert covering(view, 4, 4) == [(3, 0)]  # a summary inside a coarser line
    assert covering(view, 8, 8) == [(2, 2), (1, 6), (0, 14), (0, 15)]  # over several lines
    assert lines_text([(3, 0)]) == "in view line 0+8"
    assert lines_text([(2, 2), (1, 6)]) == "in view lines 8+4, 12+2"
    many = [(0, i) for i in range(9)]
    assert lines_text(many) == "in view lines 0+1, 1+1, 2+1, … 8+1 (9 lines)"
    assert lines_text([]) == "not in the view yet"


def test_a_snippet_shows_the_words_around_the_first_match() -> None:
    words = [f"w{n}" for n in range(40)]
    words[20] = f"{MARK}needle{END}"
    text = " ".join(words)
    assert snippet(text, 8) == "… w18 w19 «needle» w21 w22 w23 w24 w25 …"
    assert snippet(f"{MARK}start{END} of\nit", 8) == "«start» of it"  # one line
    phrase = " ".join(["x"] * 30) + f" {MARK}a b c d e{END} tail"
    assert snippet(phrase, 4).endswith("«a b c d e» …")  # a match is never cut in two


def test_term_frequency_favours_more_matches_and_shorter_texts() -> None:
    mark = search_index.MARK
    once, twice = f"{mark}kettle boils", f"{mark}kettle and {mark}kettle"
    assert tf_score(twice, 3) > tf_score(once, 3)
    assert tf_score(once, 3) > tf_score(f"{mark}kettle {FILLER}", 3)
    assert tf_score("no match here", 3) == 0


@given(st.text(min_size=1, max_size=40))
def test_no_user_text_makes_a_query_sqlite_refuses(text: str) -> None:
    conn = sqlite3.connect(":memory:")
    conn.execute("CREATE VIRTUAL TABLE hits USING fts5(text)")
    conn.execute("INSERT INTO hits VALUES ('a b c NEAR OR AND not')")
    try:
        queries = tiers(text)
    except EmptyQuery:
        return
    for query in queries:
        conn.execute("SELECT rowid FROM hits WHERE hits MATCH ?", (query,)).fetchall()


# -- ranking -----------------------------------------------------------------------------------


def test_an_exact_phrase_ranks_above_scattered_words(tmp_path: Path) -> None:
    with Chat.open(tmp_path / "chat") as chat:
        chat.append("user", "the kettle broken again")  # 0: the phrase, once
        chat.append("user", "broken glass, and a kettle")  # 1: both words, scattered
        chat.append("ever", "kettle and broken, kettle and broken")  # 2: scattered, twice
        chat.append("user", "nothing of the sort")
        result = found(chat, "kettle broken")
        assert names(result) == ["0+1", "2+1", "1+1"]  # the phrase, then the words by BM25
        assert [hit.kind for hit in result.hits] == ["user", "ever", "user"]
        assert names(found(chat, "broken again")) == ["0+1"]  # `again` is in no other


def test_rank_by_bm25_then_newer_first(tmp_path: Path) -> None:
    with Chat.open(tmp_path / "chat") as chat:
        chat.append("user", f"zebrafish {FILLER}")  # 0: one match in a long text
        chat.append("user", "zebrafish zebrafish")  # 1: a short one, twice
        chat.append("user", "a zebrafish")  # 2 and 3: the same text
        chat.append("user", "a zebrafish")
        assert names(found(chat, "zebrafish")) == ["1+1", "3+1", "2+1", "0+1"]
        assert names(found(chat, "zebrafish", limit=2)) == ["1+1", "3+1"]


def test_common_words_rank_their_newest_matches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(search_index, "COMMON", 3)  # every word here is common
    monkeypatch.setattr(search_index, "CANDIDATES", 4)
    with Chat.open(tmp_path / "chat") as chat:
        chat.append("user", "walrus walrus walrus")  # 0: the best, but older than 4 matches
        for text in ("a walrus", "walrus walrus", "a walrus", "the walrus here"):
            chat.append("user", text)
        result = found(chat, "walrus")
        assert result.capped
        assert names(result) == ["2+1", "3+1", "1+1", "4+1"]
        assert "matches were ranked" in result.text()


# -- what is indexed ---------------------------------------------------------------------------


def test_summaries_are_found_with_their_span_and_lines(tmp_path: Path) -> None:
    with Chat.open(tmp_path / "chat") as chat:
        for k in range(4):
            chat.append("user", f"message {k} {FILLER}")
        chat.build((0, 0), "the user set up a heron camera")
        chat.build((0, 1), "they tuned the heron camera's focus")
        chat.append("user", "short one about herons")  # a free leaf: its copy is not indexed
        result = found(chat, "heron camera")
        hits = result.hits
        assert [(hit.where.name, hit.kind) for hit in hits] == [
            ("1+1", "summary"),
            ("0+1", "summary"),
        ]
        assert all(hit.where.summary for hit in hits)
        view = chat.core.view.nodes()
        assert hits[0].lines == covering(view, 1, 1)
        assert hits[0].header().startswith("1+1  summary (level 0)  ")
        assert "«heron camera»" in hits[0].snippet
        assert names(found(chat, "herons")) == ["4+1"]  # the message, not its free leaf


def test_every_hit_names_its_covering_view_line(tmp_path: Path) -> None:
    with Chat.open(tmp_path / "chat") as chat:
        for k in range(12):
            chat.append("user", f"note {k}: ordinary words")
        chat.append("user", "the ticket is OPS-4471")
        result = found(chat, "ops-4471")
        assert names(result) == ["12+1"]
        hit = result.hits[0]
        view = chat.core.view.nodes()
        (line,) = hit.lines
        level, index = line
        assert index << level <= 12 < (index + 1) << level and line in view
        assert hit.text().splitlines()[0].endswith(lines_text([line]))
        assert hit.date == chat.date(12)


def test_no_hits_says_so(tmp_path: Path) -> None:
    with Chat.open(tmp_path / "chat") as chat:
        chat.append("user", "hello")
        result = found(chat, "absent-word")
        assert result.hits == [] and result.text() == "no hits for 'absent-word'"


# -- derived, checked, rebuilt -----------------------------------------------------------------


def test_the_index_is_private_and_never_synced(tmp_path: Path) -> None:
    with Chat.open(tmp_path / "chat", search=True) as chat:
        chat.append("user", "private words")
        assert chat.search is not None
        assert chat.search.conn.execute("PRAGMA synchronous").fetchone()[0] == 0
    for path in (tmp_path / "chat" / "index").glob(f"{SEARCH_NAME}*"):
        assert stat.S_IMODE(path.stat().st_mode) == 0o600, path


def test_messages_and_summaries_are_indexed_as_they_are_logged(tmp_path: Path) -> None:
    with Chat.open(tmp_path / "chat", search=True) as chat:
        index = chat.search
        assert index is not None
        chat.append("user", f"about otters {FILLER}")
        assert index.behind(chat.store) == 0
        chat.build((0, 0), "the user asked about otters")
        rows = index.conn.execute("SELECT kind FROM hits WHERE hits MATCH 'otters'").fetchall()
        assert sorted(kind for (kind,) in rows) == ["summary", "user"]


def test_a_deleted_index_is_built_again(tmp_path: Path) -> None:
    with Chat.open(tmp_path / "chat") as chat:
        chat.append("user", "lighthouse keeper")
        chat.append("user", "the lighthouse")
        before = names(found(chat, "lighthouse"))
        for path in (tmp_path / "chat" / "index").glob(f"{SEARCH_NAME}*"):
            path.unlink()
        assert names(found(chat, "lighthouse")) == before == ["1+1", "0+1"]
        assert chat.warnings == []  # a missing file is no surprise


def test_a_damaged_index_is_rebuilt_with_a_warning(tmp_path: Path) -> None:
    with Chat.open(tmp_path / "chat") as chat:
        chat.append("user", "marmalade recipe")
        names(found(chat, "marmalade"))
        path = tmp_path / "chat" / "index" / SEARCH_NAME
        for side in path.parent.glob(f"{SEARCH_NAME}-*"):
            side.unlink()
        path.write_bytes(b"this is not a database" * 100)
        assert names(found(chat, "marmalade")) == ["0+1"]
        assert any("damaged" in warning for warning in chat.warnings)


def test_an_index_of_another_log_is_rebuilt(tmp_path: Path) -> None:
    with Chat.open(tmp_path / "chat") as chat:
        chat.append("user", "first chat about puffins")
        chat.append("user", "more puffins")
        assert names(found(chat, "puffins")) == ["1+1", "0+1"]
    kept = tmp_path / "kept.sqlite"
    os.replace(tmp_path / "chat" / "index" / SEARCH_NAME, kept)
    for path in (tmp_path / "chat").iterdir():
        if path.is_dir():
            for file in sorted(path.rglob("*"), reverse=True):
                file.unlink() if file.is_file() else file.rmdir()
    with Chat.open(tmp_path / "chat") as chat:
        chat.append("user", "a new chat about gannets")
        chat.append("user", "and puffins once")
        os.replace(kept, tmp_path / "chat" / "index" / SEARCH_NAME)
        assert names(found(chat, "puffins")) == ["1+1"]  # not the old log's two
        assert any("did not match the chat" in warning for warning in chat.warnings)


def test_a_changed_tree_file_is_read_again(tmp_path: Path) -> None:
    with Chat.open(tmp_path / "chat") as chat:
        chat.append("user", f"one {FILLER}")
        chat.build((0, 0), "summary about quokkas")
        assert names(found(chat, "quokkas")) == ["0+1"]
    (tree,) = (tmp_path / "chat" / "tree").glob("*.jsonl")
    tree.write_text(tree.read_text().replace("quokkas", "wombats"))
    with Chat.open(tmp_path / "chat", readonly=True) as chat:
        assert names(found(chat, "wombats")) == ["0+1"]
        assert found(chat, "quokkas").hits == []


def test_two_processes_catch_one_index_up_without_doubles(tmp_path: Path) -> None:
    with Chat.open(tmp_path / "chat") as chat:
        for k in range(30):
            chat.append("user", f"line {k} mentions capybara")
        first = SearchIndex.open(chat.store.path)
        second = SearchIndex.open(chat.store.path)
        try:
            first.catch_up(chat.store)
            chat.append("user", "one more capybara")
            assert second.catch_up(chat.store) > 0  # the message and its free leaf's line
            assert first.catch_up(chat.store) == 0
            count = first.conn.execute("SELECT count(*) FROM hits").fetchone()[0]
            assert count == 31
        finally:
            first.close()
            second.close()


def test_the_hot_path_never_waits_for_another_writer(tmp_path: Path) -> None:
    with Chat.open(tmp_path / "chat", search=True) as chat:
        chat.append("user", "before")
        other = SearchIndex.open(chat.store.path)
        try:
            other.conn.execute("BEGIN IMMEDIATE")  # another process in the middle of a batch
            chat.append("user", "during a long catch-up")  # must not block nor raise
            assert chat.search is not None and chat.search.behind(chat.store) == 1
            other.conn.execute("COMMIT")
            assert not any("search" in warning for warning in chat.warnings)
            chat.append("user", "after")
            assert chat.search.behind(chat.store) == 0
        finally:
            other.close()


def test_a_reader_behind_the_service_trusts_what_it_indexed(tmp_path: Path) -> None:
    with Chat.open(tmp_path / "chat", search=True) as owner:
        owner.append("user", "early mention of axolotls")
        with Chat.open(tmp_path / "chat", readonly=True) as reader:  # sees one message
            owner.append("user", "later axolotls")  # indexed by the owner as it is logged
            assert names(found(reader, "axolotls")) == ["0+1"]  # not past what it knows
            assert reader.warnings == []
        assert owner.search is not None and owner.search.behind(owner.store) == 0
        assert not any("did not match" in warning for warning in owner.warnings)


def test_a_file_damaged_while_open_is_rebuilt(tmp_path: Path) -> None:
    with Chat.open(tmp_path / "chat") as chat:
        chat.append("user", "saxophone lessons")
        index = SearchIndex.open(chat.store.path, chat.warnings)
        try:
            assert names(search(chat, index, "saxophone", 10)) == ["0+1"]
            other = sqlite3.connect(index.path)
            other.execute("DROP TABLE hits")
            other.commit()
            other.close()
            assert names(search(chat, index, "saxophone", 10)) == ["0+1"]
            assert any("damaged" in warning for warning in chat.warnings)
        finally:
            index.close()
