"""The import preview's count of compaction calls (`import_cli.calls_for`): the rule of free
nodes applied level by level, each call's line taken as 400 bytes."""

from __future__ import annotations

from evertalk.import_cli import calls_for


def test_short_messages_need_no_call_until_their_merges_outgrow_a_line() -> None:
    assert calls_for([100, 100]) == 0  # both leaves free, and so is their merge (201 bytes)
    assert calls_for([300, 300]) == 1  # free leaves, but 601 bytes do not fit a line
    assert calls_for([600]) == 1  # a long leaf
    assert calls_for([600, 600]) == 3  # two leaves, then their merge of two 400-byte lines


def test_every_level_pairs_neighbours_and_an_odd_one_waits() -> None:
    assert calls_for([600] * 4) == 4 + 2 + 1
    assert calls_for([600] * 3) == 3 + 1  # the third waits for a partner
    assert calls_for([10] * 32) == 0  # 32 ten-byte leaves fit one line, 351 bytes, as a whole
    assert calls_for([10] * 64) == 1  # 64 do not: the root (703 bytes) is the one call
    assert calls_for([]) == 0
