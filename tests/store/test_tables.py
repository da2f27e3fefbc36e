"""Location records packed many at a time, and runs of records put at once."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from evertalk.store.tables import LOC_WIDTH, MemTable, OverlayTable, pack_loc, pack_locs

spans = st.lists(st.tuples(st.integers(0, 2**64 - 1), st.integers(0, 2**32 - 1)), max_size=20)


@given(file_no=st.integers(0, 2**32 - 1), spans=spans)
def test_locations_packed_at_once_are_those_packed_one_by_one(
    file_no: int, spans: list[tuple[int, int]]
) -> None:
    offsets, lengths = [s[0] for s in spans], [s[1] for s in spans]
    expected = b"".join(pack_loc(file_no, offset, length) for offset, length in spans)
    assert pack_locs(file_no, offsets, lengths) == expected


@given(before=st.integers(0, 5), at=st.integers(0, 8), count=st.integers(0, 5))
def test_a_run_of_records_is_put_as_one_by_one(before: int, at: int, count: int) -> None:
    records = [bytes([n + 1]) * LOC_WIDTH for n in range(count)]
    for table in (MemTable(LOC_WIDTH), OverlayTable(MemTable(LOC_WIDTH), 0)):
        one_by_one = MemTable(LOC_WIDTH)
        for k in range(before):
            table.put(k, b"\xff" * LOC_WIDTH)
            one_by_one.put(k, b"\xff" * LOC_WIDTH)
        table.put_run(at, b"".join(records))
        for n, record in enumerate(records):
            one_by_one.put(at + n, record)
        for k in range(before + at + count + 2):
            assert table.get(k) == one_by_one.get(k)
