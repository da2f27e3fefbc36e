"""A message over the limit an import takes is left out, named in one problem line, and the rest
of its file is imported. In a ChatGPT export it is never held whole: a zip a few kilobytes big
can hold a message of hundreds of megabytes. The inputs are made by streaming, small on disk."""

from __future__ import annotations

import json
import tracemalloc
import zipfile
from pathlib import Path
from typing import Any

from evertalk.importers import read_paths
from evertalk.importers.common import MAX_MESSAGE_CHARS

HUGE = "@@huge@@"


def conversation(cid: str, texts: list[str]) -> dict[str, Any]:
    """A ChatGPT conversation of user messages n1, n2, … in a line."""
    mapping: dict[str, Any] = {}
    parent = None
    for n, text in enumerate(texts, 1):
        node = f"n{n}"
        message = {
            "id": node,
            "author": {"role": "user"},
            "create_time": 1712052000.0 + n,
            "content": {"content_type": "text", "parts": [text]},
            "recipient": "all",
        }
        mapping[node] = {"id": node, "message": message, "parent": parent, "children": []}
        parent = node
    return {"title": cid, "conversation_id": cid, "current_node": parent, "mapping": mapping}


def huge_export(target: Path, chars: int) -> int:
    """A zip at `target` whose conversations.json holds a message of about `chars` characters
    (among others, and before another conversation), written a megabyte at a time; its length."""
    export = [conversation("big", ["before", HUGE, "after"]), conversation("next", ["still"])]
    head, tail = json.dumps(export).split(json.dumps(HUGE))
    piece = "the same log line, again and again\\n" * 29_000  # \\n: one character each
    step = len(json.loads(f'"{piece}"'))
    count = chars // step
    with (
        zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive,
        archive.open("conversations.json", "w") as member,
    ):
        member.write(head.encode() + b'"')
        for _ in range(count):
            member.write(piece.encode())
        member.write(b'"' + tail.encode())
    return count * step


def test_a_huge_message_in_a_small_zip_is_left_out_without_being_held(tmp_path: Path) -> None:
    archive = tmp_path / "export.zip"
    chars = huge_export(archive, 40_000_000)
    assert archive.stat().st_size < 400_000
    tracemalloc.start()
    try:
        reading = read_paths([archive], message_limit=1_000_000)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 12_000_000, peak  # the message alone is 40 MB
    (problem,) = reading.problems
    assert problem.file == f"{archive}!conversations.json"
    assert problem.record == "chatgpt:big:n2"
    assert f"a message of {chars:,} characters, over the 1,000,000" in problem.why
    assert "left out" in problem.why and "\n" not in str(problem)
    texts = [m.text for m in reading.by_conversation() if m.kind == "user"]
    assert texts == ["before", "after", "still"]


def test_a_line_with_a_message_over_the_limit_costs_that_message_only(tmp_path: Path) -> None:
    lines = [
        {"role": "user", "text": "x" * MAX_MESSAGE_CHARS, "time": "2025-01-01T10:00:00Z", "id": 1},
        {"role": "user", "text": "y" * (MAX_MESSAGE_CHARS + 1), "time": "2025-01-01T10:01:00Z"},
        {"role": "assistant", "text": "noted", "time": "2025-01-01T10:02:00Z", "id": 3},
    ]
    path = tmp_path / "notes.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    reading = read_paths([path])
    assert [len(m.text) for m in reading.messages()] == [MAX_MESSAGE_CHARS, 5]
    (problem,) = reading.problems
    assert problem.file == str(path)
    assert problem.why == (
        "a message of 8,000,001 characters, over the 8,000,000 an import takes; left out"
    )
