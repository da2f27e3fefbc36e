"""`chat/held.jsonl` (SPEC §6.4): entries durable and private, torn lines skipped by the rules of
the log (SPEC §1.4), the file emptied only once the log has every entry."""

from __future__ import annotations

import json
from pathlib import Path

from evertalk.store.held import HeldEntry, HeldFile

FIRST = HeldEntry("k1", "user", "first", "2026-10-08T14:03:22+02:00", ("abc.png",), "/work")
SECOND = HeldEntry("k2", "work", "[Scout] done", "2026-10-08T14:03:25+02:00", agent="Scout")


def test_entries_come_back_in_order_from_a_private_file(tmp_path: Path) -> None:
    held = HeldFile(tmp_path)
    held.add(FIRST)
    held.add(SECOND)
    held.close()
    assert (tmp_path / "held.jsonl").stat().st_mode & 0o777 == 0o600
    warnings: list[str] = []
    assert HeldFile(tmp_path).load(warnings) == [FIRST, SECOND]
    assert warnings == []


def test_a_torn_last_line_is_skipped_and_ended_by_the_next_write(tmp_path: Path) -> None:
    held = HeldFile(tmp_path)
    held.add(FIRST)
    held.close()
    path = tmp_path / "held.jsonl"
    with path.open("ab") as file:
        file.write(b'{"key":"k9","kind":"user","te')  # a write cut by a crash
    warnings: list[str] = []
    again = HeldFile(tmp_path)
    assert again.load(warnings) == [FIRST]
    assert len(warnings) == 1 and "line 2" in warnings[0] and "torn" in warnings[0]
    again.add(SECOND)
    again.close()
    assert HeldFile(tmp_path).load([]) == [FIRST, SECOND]
    # a torn line that parses as JSON is ended with `#`: it can never pass for an entry
    with path.open("ab") as file:
        file.write(json.dumps({"key": "k3", "kind": "user", "text": "x", "date": "d"}).encode())
    third = HeldFile(tmp_path)
    assert third.load([]) == [FIRST, SECOND]
    third.add(FIRST)
    third.close()
    assert path.read_bytes().count(b"}#\n") == 1
    assert [e.key for e in HeldFile(tmp_path).load([])] == ["k1", "k2", "k1"]


def test_a_line_that_is_not_an_entry_is_skipped_with_a_warning(tmp_path: Path) -> None:
    path = tmp_path / "held.jsonl"
    path.write_text('{"key": 3}\nnot json\n' + json.dumps(FIRST.__dict__ | {"images": []}) + "\n")
    warnings: list[str] = []
    entries = HeldFile(tmp_path).load(warnings)
    assert [e.key for e in entries] == ["k1"]
    assert len(warnings) == 2


def test_the_file_is_emptied_once_the_log_has_every_entry(tmp_path: Path) -> None:
    held = HeldFile(tmp_path)
    held.add(FIRST)
    held.add(SECOND)
    path = tmp_path / "held.jsonl"
    held.settle(lambda key: key == "k1")
    assert [e.key for e in HeldFile(tmp_path).load([])] == ["k1", "k2"]
    held.settle(lambda key: True)
    assert path.stat().st_size == 0
    held.add(SECOND)
    held.close()
    assert HeldFile(tmp_path).load([]) == [SECOND]
