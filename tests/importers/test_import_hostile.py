"""Files made to hurt the reader: a zip that expands to gigabytes, a line nested past any stack,
a line or a document over the size an import reads. Each costs one problem line naming it, never
the memory it claims, never the rest of the file; the inputs are made cheaply (a declared size,
highly compressible data, a small limit)."""

from __future__ import annotations

import json
import struct
import tracemalloc
import zipfile
from pathlib import Path

from importer_helpers import CHATGPT_EXPORT, zip_export

from evertalk.importers import read_paths
from evertalk.importers.common import MAX_DOCUMENT_BYTES


def plain_line(n: int, text: str | None = None) -> str:
    return json.dumps(
        {"role": "user", "text": text or f"message {n}", "time": "2025-01-01T10:00:00Z", "id": n}
    )


def declare_size(archive: Path, member: str, size: int) -> None:
    """Make the zip's central directory claim that `member` expands to `size` bytes, as a
    zip bomb's does, without writing them."""
    data = bytearray(archive.read_bytes())
    with zipfile.ZipFile(archive) as opened:
        info = opened.getinfo(member)
    entry = data.find(b"PK\x01\x02")  # each entry of the central directory
    while entry >= 0:
        name_length = struct.unpack_from("<H", data, entry + 28)[0]
        if data[entry + 46 : entry + 46 + name_length].decode() == info.filename:
            struct.pack_into("<I", data, entry + 24, size)
        entry = data.find(b"PK\x01\x02", entry + 1)
    archive.write_bytes(bytes(data))


def test_a_zip_member_that_claims_gigabytes_is_refused_unread(tmp_path: Path) -> None:
    archive = zip_export(CHATGPT_EXPORT, tmp_path / "export.zip")
    declare_size(archive, "conversations.json", 3_300_000_000)
    with zipfile.ZipFile(archive) as opened:
        assert opened.getinfo("conversations.json").file_size == 3_300_000_000
    reading = read_paths([archive])
    assert reading.conversations == []
    (problem,) = reading.problems
    assert problem.file == f"{archive}!conversations.json"
    assert "3.1 GiB" in problem.why and "nothing was read" in problem.why
    assert "\n" not in str(problem)
    assert MAX_DOCUMENT_BYTES < 3_300_000_000


def test_a_real_zip_bomb_is_refused_at_the_limit_and_the_zips_other_exports_read(
    tmp_path: Path,
) -> None:
    archive = zip_export(CHATGPT_EXPORT, tmp_path / "export.zip")
    with zipfile.ZipFile(archive, "a", zipfile.ZIP_DEFLATED) as opened:
        opened.writestr("more/conversations-2.json", "[" + " " * 3_000_000 + "]")
    assert archive.stat().st_size < 200_000
    reading = read_paths([archive], document_limit=1_000_000)
    assert [p.file for p in reading.problems] == [f"{archive}!more/conversations-2.json"]
    assert "over the 976.6 KiB" in reading.problems[0].why
    assert len(reading.conversations) == 2  # the export's own file is read


def test_a_document_over_the_limit_outside_a_zip_is_refused_too(tmp_path: Path) -> None:
    export = tmp_path / "conversations.json"
    export.write_text("[" + " " * 200_000 + "]")
    reading = read_paths([export], document_limit=100_000)
    (problem,) = reading.problems
    assert problem.file == str(export) and "nothing was read" in problem.why


def test_an_export_is_read_one_conversation_at_a_time(tmp_path: Path) -> None:
    conversation = json.loads((CHATGPT_EXPORT / "conversations.json").read_text())[0]
    padding = {"metadata_we_never_read": "x" * 20_000}
    many = [
        {**conversation, "id": f"c{n}", "conversation_id": f"c{n}", **padding} for n in range(600)
    ]
    export = tmp_path / "conversations.json"
    export.write_text(json.dumps(many))
    size = export.stat().st_size
    tracemalloc.start()
    try:
        reading = read_paths([export])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(reading.conversations) == 600 and reading.problems == []
    assert peak < size // 3, (peak, size)  # parsed whole, it would take several times its size


def test_a_line_nested_past_any_stack_costs_that_line_only(tmp_path: Path) -> None:
    path = tmp_path / "notes.jsonl"
    deep = '{"role": "user", "text": "x", "deep": ' + "[" * 100_000 + "]" * 100_000 + "}"
    path.write_text("\n".join([plain_line(1), plain_line(2), deep, plain_line(4)]) + "\n")
    reading = read_paths([path])
    assert [m.text for m in reading.messages()] == ["message 1", "message 2", "message 4"]
    (problem,) = reading.problems
    assert problem.line == 3 and "nested" in problem.why


def test_a_line_over_the_limit_is_skipped_and_the_rest_read(tmp_path: Path) -> None:
    path = tmp_path / "notes.jsonl"
    lines = [plain_line(1), plain_line(2, "y" * 300_000), plain_line(3)]
    path.write_text("\n".join(lines) + "\n")
    reading = read_paths([path], line_limit=100_000)
    assert [m.text for m in reading.messages()] == ["message 1", "message 3"]
    (problem,) = reading.problems
    assert problem.line == 2 and "over the 97.7 KiB" in problem.why


def test_an_image_member_that_claims_gigabytes_is_never_read(tmp_path: Path) -> None:
    archive = zip_export(CHATGPT_EXPORT, tmp_path / "export.zip")
    declare_size(archive, "file-8cWq1Lm2Zk9Yx4Tb-IMG_2041.png", 3_300_000_000)
    reading = read_paths([archive])
    assert reading.problems == []
    assert reading.skipped["images over 5 MB"] == 1
