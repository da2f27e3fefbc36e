"""The journal of in-place changes (`store/edits.py`): its position, what changed after one,
and a torn last line."""

from __future__ import annotations

import stat
from pathlib import Path

from evertalk.store.edits import EDITS_FILE, edits_since, record_edit


def test_each_change_is_a_position_and_names_its_ids(tmp_path: Path) -> None:
    assert edits_since(tmp_path, 0) == (0, [])
    record_edit(tmp_path, [5, 3, 5])
    record_edit(tmp_path, [9])
    assert edits_since(tmp_path, 0) == (2, [3, 5, 9])
    assert edits_since(tmp_path, 1) == (2, [9])
    assert edits_since(tmp_path, 2) == (2, [])
    assert stat.S_IMODE((tmp_path / EDITS_FILE).stat().st_mode) == 0o600
    assert b"text" not in (tmp_path / EDITS_FILE).read_bytes()  # ids only, never text


def test_a_position_past_the_end_gets_every_change(tmp_path: Path) -> None:
    record_edit(tmp_path, [1])
    assert edits_since(tmp_path, 7) == (1, [1])  # a journal set back: read everything again


def test_a_torn_last_line_is_no_change_and_the_next_one_starts_afresh(tmp_path: Path) -> None:
    record_edit(tmp_path, [1])
    with (tmp_path / EDITS_FILE).open("ab") as file:
        file.write(b'{"ids":[4')  # a write that never returned
    assert edits_since(tmp_path, 0) == (1, [1])
    record_edit(tmp_path, [2])
    assert edits_since(tmp_path, 1) == (3, [2])  # the torn line ended, counted, naming nothing
