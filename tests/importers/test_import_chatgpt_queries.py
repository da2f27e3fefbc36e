"""A ChatGPT search whose tool message holds no text and no results imports the queries it ran,
not `(no output)`: named in that message's metadata (`search_queries`), or in the assistant's
call to `web.run` it answers (a JSON `search_query`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from importer_helpers import CHATGPT_SEARCH, only, pairs

from evertalk.importers import read_paths

SEARCH = "683e6a00-1b2c-8004-9d3e-4f5a6b7c8d9e"
CALL, RESULT = "c0de0002-5a6b-4c7d-8e9f-0a1b2c3d4e5f", "c0de0003-5a6b-4c7d-8e9f-0a1b2c3d4e5f"


def search_export(tmp_path: Path, call: dict[str, Any], result: dict[str, Any]) -> Path:
    """The fixture's search, its call's content and its result's metadata replaced."""
    export = json.loads((CHATGPT_SEARCH / "conversations.json").read_text(encoding="utf-8"))
    search = next(c for c in export if c["id"] == SEARCH)
    search["mapping"][CALL]["message"]["content"] = call
    search["mapping"][RESULT]["message"]["metadata"] = result
    path = tmp_path / "conversations.json"
    path.write_text(json.dumps([search]), encoding="utf-8")
    return path


def echo(path: Path) -> str:
    kinds = pairs(only(read_paths([path])))
    (text,) = [text for kind, text in kinds if kind == "echo"]
    return text


def test_the_queries_in_the_results_metadata_are_imported(tmp_path: Path) -> None:
    queries = [
        {"type": "search", "q": "Kyoto weather this weekend"},
        {"type": "search", "q": "Kyoto rain Saturday"},
    ]
    call = {"content_type": "text", "parts": [""]}
    path = search_export(tmp_path, call, {"search_queries": queries, "model_slug": "gpt-4o"})
    assert echo(path) == "web.run: searched: Kyoto weather this weekend; Kyoto rain Saturday"


def test_the_queries_of_the_call_it_answers_are_imported(tmp_path: Path) -> None:
    asked = {
        "search_query": [{"q": "Kyoto weather"}, {"q": "Kyoto rain"}],
        "response_length": "short",
    }
    call = {"content_type": "code", "language": "unknown", "text": json.dumps(asked)}
    path = search_export(tmp_path, call, {"model_slug": "gpt-4o"})
    assert echo(path) == "web.run: searched: Kyoto weather; Kyoto rain"


def test_a_search_with_neither_still_says_it_gave_nothing(tmp_path: Path) -> None:
    call = {"content_type": "code", "language": "unknown", "text": '{"open": [{"ref_id": "x"}]}'}
    path = search_export(tmp_path, call, {"search_queries": [{"type": "search", "q": " "}]})
    assert echo(path) == "web.run: (no output)"
