"""Scanning JSON Lines with the torn-line rules (SPEC §1.4) and appending whole lines (§1.3)."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from budget import examples
from evertalk.store import jsonl
from evertalk.store.jsonl import TERM_HASH, TERM_NEWLINE, TERM_NONE, Appender, Reader, Scan


def scan_all(path: Path, start: int = 0, first_lineno: int = 1) -> tuple[Scan, list[jsonl.Line]]:
    scan = Scan(path, start, first_lineno, [])
    return scan, list(scan)


def test_complete_lines_are_yielded_with_offsets_and_numbers(tmp_path: Path) -> None:
    path = tmp_path / "f.jsonl"
    path.write_bytes(b'{"a": 1}\n{"b": "\xc3\xa9"}\n')
    scan, lines = scan_all(path)
    assert [(x.offset, x.length, x.lineno, x.record) for x in lines] == [
        (0, 9, 1, {"a": 1}),
        (9, 12, 2, {"b": "é"}),
    ]
    assert (scan.end, scan.lines, scan.term, scan.warnings) == (21, 2, TERM_NONE, [])


def test_invalid_lines_anywhere_are_skipped_with_a_warning(tmp_path: Path) -> None:
    path = tmp_path / "f.jsonl"
    path.write_bytes(b'{"a": 1}\n{"a": \n[1, 2]\n\xff\xfe\n{"a": 2}\n')
    scan, lines = scan_all(path)
    assert [x.record for x in lines] == [{"a": 1}, None, None, None, {"a": 2}]
    assert len(scan.warnings) == 3
    for lineno, warning in zip((2, 3, 4), scan.warnings, strict=True):
        assert f"{path} line {lineno}:" in warning


def test_a_torn_line_that_is_not_json_needs_a_newline(tmp_path: Path) -> None:
    path = tmp_path / "f.jsonl"
    path.write_bytes(b'{"a": 1}\n{"i": 7, "te')
    scan, lines = scan_all(path)
    assert [x.record for x in lines] == [{"a": 1}]
    assert (scan.end, scan.lines, scan.term) == (9, 1, TERM_NEWLINE)
    assert len(scan.warnings) == 1
    assert f"{path} line 2" in scan.warnings[0] and "torn" in scan.warnings[0]


def test_a_torn_line_that_parses_needs_a_hash(tmp_path: Path) -> None:
    path = tmp_path / "f.jsonl"
    path.write_bytes(b'{"a": 1}\n{"i": 7}')
    scan, lines = scan_all(path)
    assert [x.record for x in lines] == [{"a": 1}]
    assert scan.term == TERM_HASH
    # With `#` the old line can never pass for a record again.
    path.write_bytes(path.read_bytes() + TERM_HASH + b'{"i": 8}\n')
    scan, lines = scan_all(path)
    assert [x.record for x in lines] == [{"a": 1}, None, {"i": 8}]
    assert scan.term == TERM_NONE


def test_scan_from_an_offset_numbers_lines_from_the_caller(tmp_path: Path) -> None:
    path = tmp_path / "f.jsonl"
    path.write_bytes(b'{"a": 1}\n{"a": 2}\n{"a": 3}\n')
    scan, lines = scan_all(path, start=9, first_lineno=2)
    assert [(x.offset, x.lineno, x.record) for x in lines] == [(9, 2, {"a": 2}), (18, 3, {"a": 3})]
    assert (scan.end, scan.lines) == (27, 3)


def test_an_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "f.jsonl"
    path.write_bytes(b"")
    scan, lines = scan_all(path)
    assert lines == [] and (scan.end, scan.lines, scan.term) == (0, 0, TERM_NONE)


line_texts = st.lists(
    st.one_of(
        st.dictionaries(st.text(max_size=3), st.text(max_size=40), max_size=3).map(json.dumps),
        st.text(max_size=30).filter(lambda s: "\n" not in s),
    ),
    max_size=30,
)


def test_a_line_that_grows_while_it_is_read_is_read_whole(tmp_path: Path) -> None:
    """The bytes a read finds at the file's end, without their newline, are a torn line only
    if nothing follows them by the end of the scan."""
    path = tmp_path / "f.jsonl"
    path.write_bytes(b'{"a": 1}\n{"b": ')
    old = jsonl.CHUNK
    jsonl.CHUNK = 1  # a batch of one line
    try:
        scan = Scan(path, warnings=[])
        batches = scan.batches()
        first = next(batches)
        with open(path, "ab") as file:
            file.write(b'2}\n{"c": 3}\n')
        rest = list(batches)
    finally:
        jsonl.CHUNK = old
    assert first.lines == [b'{"a": 1}\n']
    assert [(b.offset, b.lineno, b.lines) for b in rest] == [
        (9, 2, [b'{"b": 2}\n']),
        (18, 3, [b'{"c": 3}\n']),
    ]
    assert (scan.end, scan.lines, scan.term, scan.warnings) == (27, 3, TERM_NONE, [])


@settings(max_examples=examples(150), deadline=None)
@given(texts=line_texts, torn=st.text(max_size=20), chunk=st.integers(1, 64))
def test_scan_agrees_with_splitting_the_whole_file(texts: list[str], torn: str, chunk: int) -> None:
    """Whatever the chunk size, a scan sees exactly the lines a whole-file split sees."""
    torn = torn.replace("\n", "")
    data = "".join(t + "\n" for t in texts).encode() + torn.encode()
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "f.jsonl"
        path.write_bytes(data)
        old = jsonl.CHUNK
        jsonl.CHUNK = chunk
        try:
            scan, lines = scan_all(path)
        finally:
            jsonl.CHUNK = old
    offset = 0
    assert len(lines) == len(texts)
    for line, text in zip(lines, texts, strict=True):
        raw = text.encode()
        assert (line.offset, line.length) == (offset, len(raw) + 1)
        assert data[line.offset : line.offset + line.length] == raw + b"\n"
        parsed = jsonl.parse_object(raw)
        assert line.record == (parsed if isinstance(parsed, dict) else None)
        offset += len(raw) + 1
    assert scan.end == offset and scan.lines == len(texts)
    if torn:
        assert scan.term == jsonl.torn_terminator(torn.encode()) != TERM_NONE
    else:
        assert scan.term == TERM_NONE


def test_append_writes_one_line_and_returns_where_the_data_is(
    tmp_path: Path, count_fsyncs: object
) -> None:
    path = tmp_path / "f.jsonl"
    appender = Appender()
    try:
        assert appender.append(path, b'{"a": 1}') == (0, 9)
        assert appender.append(path, b'{"a": 2}', prefix=TERM_HASH) == (11, 9)
    finally:
        appender.close()
    assert path.read_bytes() == b'{"a": 1}\n#\n{"a": 2}\n'
    assert os.stat(path).st_mode & 0o777 == 0o600


def test_append_is_one_write_and_one_fsync(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "f.jsonl"
    path.write_bytes(b"")
    calls: list[str] = []
    real_write, real_fsync = os.write, os.fsync

    def write(fd: int, data: bytes) -> int:
        calls.append("write")
        return real_write(fd, data)

    def fsync(fd: int) -> None:
        calls.append("fsync")
        real_fsync(fd)

    monkeypatch.setattr(os, "write", write)
    monkeypatch.setattr(os, "fsync", fsync)
    appender = Appender()
    try:
        appender.append(path, b"{}", prefix=TERM_NEWLINE)
        appender.append(path, b"{}")
    finally:
        appender.close()
    assert calls == ["write", "fsync", "write", "fsync"]


def test_append_creating_a_file_also_syncs_its_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    synced: list[bool] = []
    real = os.fsync

    def fsync(fd: int) -> None:
        synced.append(os.path.isdir(f"/proc/self/fd/{fd}"))
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    appender = Appender()
    try:
        appender.append(tmp_path / "new.jsonl", b"{}")
        appender.append(tmp_path / "new.jsonl", b"{}")
    finally:
        appender.close()
    assert synced == [False, True, False]


def test_reader_reads_ranges_across_many_files(tmp_path: Path) -> None:
    reader = Reader(tmp_path, max_open=2)
    try:
        for k in range(5):
            (tmp_path / f"{k}.jsonl").write_bytes(f"line {k}\n".encode())
        for k in (0, 3, 1, 4, 0, 2):
            assert reader.read(f"{k}.jsonl", 5, 1) == str(k).encode()
    finally:
        reader.close()


def test_a_derived_write_is_synced_later_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write of records an open can rebuild skips its fsync; `sync` (before an index
    checkpoint) makes it durable, once however many such writes came before; closing does not."""
    calls: list[str] = []
    real = os.fsync

    def fsync(fd: int) -> None:
        calls.append(Path(os.readlink(f"/proc/self/fd/{fd}")).name)
        real(fd)

    path = tmp_path / "tree.jsonl"
    path.write_bytes(b"")
    monkeypatch.setattr(os, "fsync", fsync)
    appender = Appender()
    try:
        for _ in range(3):
            appender.append_lines(path, [b"{}"], durable=False)
        assert calls == []
        appender.sync()
        appender.sync()  # nothing new to sync
        assert calls == ["tree.jsonl"]
        appender.append_lines(path, [b"{}"], durable=False)
    finally:
        appender.close()
    assert calls == ["tree.jsonl"]
    assert path.read_bytes() == b"{}\n" * 4


def test_a_file_closed_to_make_room_syncs_its_derived_writes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A checkpoint after the eviction could no longer sync them, though it names them."""
    calls: list[str] = []
    real = os.fsync

    def fsync(fd: int) -> None:
        calls.append(Path(os.readlink(f"/proc/self/fd/{fd}")).name)
        real(fd)

    monkeypatch.setattr(os, "fsync", fsync)
    appender = Appender(max_open=1)
    try:
        appender.append_lines(tmp_path / "a.jsonl", [b"{}"], durable=False)
        appender.append_lines(tmp_path / "b.jsonl", [b"{}"], durable=False)
        assert "a.jsonl" in calls and "b.jsonl" not in calls
    finally:
        appender.close()
