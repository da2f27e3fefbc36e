"""A forget keeps the derived index and the search database, fixed up for the files it rewrote
(SPEC §12): the next open trusts the index rather than building it again from the whole log,
and the search database loses the rows but is not built again either."""

from __future__ import annotations

import json
from pathlib import Path

from forget_helpers import SMALL, build_all, files_holding, make_chat

from evertalk.chat import Chat
from evertalk.cli import main
from evertalk.memory.tree import BUILT
from evertalk.search.query import tiers, tokens
from evertalk.store.search_index import SearchIndex

WORD = "zqpelican4410"
TARGETS = (6, 22)


def _build_token(chat_dir: Path) -> str:
    return str(json.loads((chat_dir / "index" / "meta.json").read_bytes())["build"])


def _find(index: SearchIndex, query: str) -> int:
    return len(index.search(tiers(query), tokens(query), 50).hits)


def _rows(index: SearchIndex) -> int:
    return int(index.conn.execute("SELECT count(*) FROM hits").fetchone()[0])


def _indexed(chat: Chat) -> int:
    """Rows a search database of the chat holds: a message each, a summary the model wrote."""
    return chat.t + sum(row.count(BUILT) for row in chat.store.node_flags())


def test_a_forget_fixes_the_index_up_instead_of_building_it_again(tmp_path: Path) -> None:
    home = tmp_path / "home"
    chat_dir = make_chat(home, words=dict.fromkeys(TARGETS, WORD))
    with Chat.open(chat_dir, budget=SMALL) as chat:
        search = SearchIndex.open(chat_dir)
        search.catch_up(chat.store)
        assert _find(search, WORD) > 2  # the messages and the summaries over them
        search.close()
        before = {i: chat.store.read_message(i) for i in range(chat.t)}
    before_forget = _build_token(chat_dir)

    for target in TARGETS:
        assert main(["memory", "forget", str(target), "--yes", "--home", str(home)]) == 0
    assert files_holding(home, WORD) == []
    assert (chat_dir / "index" / "search.sqlite").is_file()

    build = _build_token(chat_dir)
    assert build != before_forget  # a reader that loaded the index files before can tell
    with Chat.open(chat_dir, budget=SMALL) as chat:
        store = chat.store
        for i, record in before.items():
            now = store.read_message(i)
            assert now == record if i not in TARGETS else now.text.startswith("[forgotten on ")
        for level, row in enumerate(store.node_flags()):
            for i, flag in enumerate(row):
                assert (store.read_node(level, i) is not None) == bool(flag)
        assert not [w for w in store.warnings if "index" in w]
        assert _build_token(chat_dir) == build  # read whole, and never built again

        warnings: list[str] = []
        search = SearchIndex.open(chat_dir, warnings)
        search.catch_up(store)  # the free nodes the open built, if any
        assert warnings == [] and _rows(search) == _indexed(chat)  # not built again: fixed up
        assert _find(search, WORD) == 0 and _find(search, "forgotten") == 2
        assert _find(search, "deploy") > 0
        rebuilt = build_all(chat)
        assert 0 < search.catch_up(store) <= rebuilt  # the summaries built again, alone
        assert warnings == [] and _rows(search) == _indexed(chat) and _find(search, WORD) == 0
        search.close()
    assert files_holding(home, WORD) == []
