"""The chat folder through ChatStore: appends, reads, torn lines, ids, keys (SPEC §1)."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from evertalk.store import ChatStore, CorruptLog, MessageRecord, StoreError
from evertalk.store.records import encode_message

TZ = timezone(timedelta(hours=2))
DAY1 = datetime(2026, 1, 1, 12, 0, 0, tzinfo=TZ)
DAY2 = datetime(2026, 1, 2, 12, 0, 0, tzinfo=TZ)
Snapshot = Callable[[Path], dict[str, tuple[int, bytes]]]


def line(i: int, text: str = "", key: str | None = None) -> bytes:
    return encode_message(i, "user", text or f"m{i}", "2026-01-01T12:00:00+02:00", key) + b"\n"


def write_log(chat: Path, files: dict[str, bytes]) -> None:
    """A log written by hand, then opened once so that the folder and index exist."""
    ChatStore.open(chat).close()
    for name, content in files.items():
        (chat / "main" / name).write_bytes(content)


def test_append_and_read_back(chat: Path) -> None:
    with ChatStore.open(chat) as store:
        assert store.message_count == 0
        assert store.append_message("user", "héllo\nthere", date=DAY1) == 0
        assert store.append_message("work", "[Bo] done", date=DAY1, agent="Bo", key="x") == 1
        assert store.append_message("user", "pic", date=DAY2, images=["ab.png", "cd.jpg"]) == 2
        assert store.message_count == 3
        expected = [
            MessageRecord(0, "user", "héllo\nthere", 12, "2026-01-01T12:00:00+02:00"),
            MessageRecord(1, "work", "[Bo] done", 9, "2026-01-01T12:00:00+02:00", "x", None, "Bo"),
            MessageRecord(
                2, "user", "pic", 3, "2026-01-02T12:00:00+02:00", None, ("ab.png", "cd.jpg")
            ),
        ]
        assert [store.read_message(i) for i in range(3)] == expected
        with pytest.raises(IndexError):
            store.read_message(3)
    assert sorted(p.name for p in (chat / "main").iterdir()) == [
        "2026-01-01.jsonl",
        "2026-01-02.jsonl",
    ]
    with ChatStore.open(chat) as store:
        assert store.warnings == []
        assert [store.read_message(i) for i in range(3)] == expected


def test_each_append_fsyncs_before_it_returns(chat: Path, count_fsyncs: Callable[[], int]) -> None:
    with ChatStore.open(chat) as store:
        before = count_fsyncs()
        store.append_message("user", "a", date=DAY1)
        # the new day file, its folder, then the index's checkpoint that numbers the new file
        # (its files, its keys, meta.json)
        new_file = 2 + 3
        assert count_fsyncs() == before + new_file
        for k in range(5):
            store.append_message("ever", f"b{k}", date=DAY1)
            assert count_fsyncs() == before + new_file + 1 + k
        appended = count_fsyncs()
        store.append_node(0, 0, "user: a", 2, date=DAY1)  # a new tree file, a new index level
        assert count_fsyncs() >= appended + new_file


def test_a_torn_line_is_skipped_and_the_next_append_starts_with_a_newline(
    chat: Path,
) -> None:
    with ChatStore.open(chat) as store:
        store.append_message("user", "one", date=DAY1)
        store.append_message("user", "two", date=DAY1)
    path = chat / "main" / "2026-01-01.jsonl"
    torn = line(2, "lost")[:25]
    with path.open("ab") as file:
        file.write(torn)
    with ChatStore.open(chat) as store:
        assert store.message_count == 2
        assert len(store.warnings) == 1
        assert f"{path} line 3" in store.warnings[0] and "torn" in store.warnings[0]
        assert store.append_message("user", "three", date=DAY1) == 2
        assert store.read_message(2).text == "three"
    assert torn + b"\n" + line(2, "three")[:20] in path.read_bytes()
    with ChatStore.open(chat) as store:
        assert [store.read_message(i).text for i in range(3)] == ["one", "two", "three"]
        assert store.warnings == []  # the index remembers that line 3 was read and skipped
    for path_ in (chat / "index").iterdir():
        path_.unlink()
    with ChatStore.open(chat) as store:
        assert [store.read_message(i).text for i in range(3)] == ["one", "two", "three"]
        assert f"{path} line 3: not valid JSON" in store.warnings[-1]


def test_a_torn_line_that_parses_gets_a_hash(chat: Path) -> None:
    with ChatStore.open(chat) as store:
        store.append_message("user", "one", date=DAY1)
    path = chat / "main" / "2026-01-01.jsonl"
    with path.open("ab") as file:
        file.write(line(1, "lost").rstrip(b"\n"))  # only the newline was lost
    with ChatStore.open(chat) as store:
        assert store.message_count == 1
        assert store.append_message("user", "two", date=DAY1) == 1
    assert line(1, "lost").rstrip(b"\n") + b"#\n" in path.read_bytes()
    with ChatStore.open(chat) as store:
        assert store.message_count == 2
        assert store.read_message(1).text == "two"


def test_invalid_lines_mid_file_are_skipped_with_a_warning(chat: Path) -> None:
    name = "2026-01-01.jsonl"
    write_log(chat, {name: line(0) + b"{oops\n" + line(1) + b'{"i": "x"}\n' + line(2)})
    with ChatStore.open(chat) as store:
        assert store.message_count == 3
        assert [store.read_message(i).text for i in range(3)] == ["m0", "m1", "m2"]
        path = chat / "main" / name
        assert len(store.warnings) == 2
        assert f"{path} line 2" in store.warnings[0] and f"{path} line 4" in store.warnings[1]


@pytest.mark.parametrize(
    ("content", "where", "what"),
    [
        (line(0) + line(1) + line(3) + line(4), "line 3", "missing"),
        (line(0) + line(1) + line(1) + line(2), "line 3", "duplicate"),
        (line(0) + line(2), "line 2", "message 1 is missing"),
    ],
)
@pytest.mark.parametrize("index", ["fresh", "deleted"])
def test_a_gap_or_a_duplicate_refuses_to_open_and_writes_nothing(
    chat: Path, snapshot: Snapshot, content: bytes, where: str, what: str, index: str
) -> None:
    with ChatStore.open(chat) as store:
        store.append_message("user", "m0", date=DAY1)
    if index == "deleted":
        for path in (chat / "index").iterdir():
            path.unlink()
        (chat / "index").rmdir()
    path = chat / "main" / "2026-01-01.jsonl"
    path.write_bytes(content)
    before = snapshot(chat)
    with pytest.raises(CorruptLog) as caught:
        ChatStore.open(chat)
    message = str(caught.value)
    assert f"{path} {where}" in message and what in message and "\n" not in message
    assert snapshot(chat) == before
    with pytest.raises(CorruptLog):
        ChatStore.open(chat, readonly=True)
    assert snapshot(chat) == before


def test_a_duplicate_in_the_tail_of_an_indexed_log_refuses_to_open(
    chat: Path, snapshot: Snapshot
) -> None:
    with ChatStore.open(chat) as store:
        for k in range(3):
            store.append_message("user", f"m{k}", date=DAY1)
    other = chat / "main" / "2026-01-02.jsonl"
    other.write_bytes(line(1))
    before = snapshot(chat)
    with pytest.raises(CorruptLog, match=f"{other} line 1: message id 1 is a duplicate"):
        ChatStore.open(chat)
    with pytest.raises(CorruptLog):
        ChatStore.open(chat, readonly=True)
    assert snapshot(chat) == before


def test_ids_not_names_order_the_messages(chat: Path) -> None:
    """A clock that stepped back put later ids in an earlier-named file."""
    write_log(
        chat,
        {
            "2026-01-02.jsonl": line(0) + line(1) + line(4),
            "2026-01-01.jsonl": line(2) + line(3),
            "2026-01-03.jsonl": line(5),
        },
    )
    for readonly in (False, True, False):
        with ChatStore.open(chat, readonly=readonly) as store:
            assert store.message_count == 6
            assert [store.read_message(i).text for i in range(6)] == [f"m{i}" for i in range(6)]
            assert store.message_location(2).file == "main/2026-01-01.jsonl"
    with ChatStore.open(chat) as store:
        assert store.append_message("user", "m6", date=DAY1) == 6
    with ChatStore.open(chat) as store:
        assert store.read_message(6).text == "m6"


def test_a_known_key_returns_its_id_and_writes_nothing(chat: Path, snapshot: Snapshot) -> None:
    with ChatStore.open(chat) as store:
        assert store.append_message("user", "a", key="k1", date=DAY1) == 0
        assert store.append_message("user", "b", date=DAY1) == 1
        before = snapshot(chat / "main")
        assert store.append_message("user", "a again", key="k1", date=DAY2) == 0
        assert snapshot(chat / "main") == before
        assert store.append_message("user", "c", key="k2", date=DAY1) == 2
    with ChatStore.open(chat) as store:
        assert store.append_message("user", "a", key="k1") == 0
        assert store.append_message("user", "c", key="k2") == 2
        assert store.message_count == 3
    with ChatStore.open(chat, readonly=True) as reader:
        assert reader.read_message(0).key == "k1"


def test_appends_are_refused_when_they_cannot_be_right(chat: Path) -> None:
    store = ChatStore.open(chat)
    store.append_message("user", "a")
    with pytest.raises(ValueError, match="does not exist"):
        store.append_node(1, 0, "x", 1)
    store.append_node(0, 0, "user: a", 2)
    with pytest.raises(ValueError, match="already built"):
        store.append_node(0, 0, "user: a", 2)
    with pytest.raises(ValueError, match="kind"):
        store.append_message("robot", "a")
    assert store.message_count == 1
    store.close()
    store.close()
    with pytest.raises(StoreError, match="closed"):
        store.append_message("user", "b")
    with (
        ChatStore.open(chat, readonly=True) as reader,
        pytest.raises(StoreError, match="read-only"),
    ):
        reader.append_message("user", "b")


def test_open_without_create_needs_a_chat(chat: Path) -> None:
    with pytest.raises(StoreError, match="no chat"):
        ChatStore.open(chat, create=False)
    with pytest.raises(StoreError, match="no chat"):
        ChatStore.open(chat, readonly=True)
    assert not chat.exists()


_READ_ONLY_SCRIPT = textwrap.dedent(
    """
    import os, sys
    from pathlib import Path
    from evertalk.store import ChatStore, StoreError
    from evertalk.store import scan  # loaded by the first open that writes: before the setuid
    home = Path(sys.argv[1])
    if len(sys.argv) > 2:  # root writes through any mode: become someone else, imports done
        os.setgid(int(sys.argv[3]))
        os.setuid(int(sys.argv[2]))
    with ChatStore.open(home / "chat") as store:
        store.append_message("user", "hi")
    for path in [home, *home.rglob("*")]:
        if path.is_dir():
            os.chmod(path, 0o500)
    for target in (home / "chat", home / "other" / "chat"):
        try:
            ChatStore.open(target)
        except StoreError as error:
            print(str(error))
        else:
            print("opened")
    with ChatStore.open(home / "chat", readonly=True) as reader:
        print(reader.read_message(0).text)
    """
)


def test_a_read_only_folder_is_a_clear_store_error(tmp_path: Path) -> None:
    """Run as an unprivileged user: root writes through any mode."""
    home = tmp_path / "home"
    args = [sys.executable, "-c", _READ_ONLY_SCRIPT, str(home)]
    if os.geteuid() == 0:
        # tmp_path's parents are private to root; /tmp is open to all.
        nobody = pwd.getpwnam("nobody")
        home = Path(tempfile.mkdtemp(prefix="evertalk-ro-", dir="/tmp")) / "home"
        home.mkdir()
        os.chown(home.parent, nobody.pw_uid, nobody.pw_gid)
        os.chown(home, nobody.pw_uid, nobody.pw_gid)
        args = [*args[:3], str(home), str(nobody.pw_uid), str(nobody.pw_gid)]
    try:
        run = subprocess.run(args, capture_output=True, text=True, check=False)
        assert run.returncode == 0, run.stderr
        first, second, read = run.stdout.splitlines()
        assert str(home / "chat") in first and "read-only" in first
        assert str(home) in second and "Permission denied" in second
        assert read == "hi"
    finally:
        if os.geteuid() == 0:
            shutil.rmtree(home.parent)


def test_a_failed_index_update_stops_appends_until_reopened(chat: Path) -> None:
    store = ChatStore.open(chat)
    store.append_message("user", "a", date=DAY1)
    # A real fault: the index file's descriptor now refuses writes.
    msg_fd = store._index.files.msg.fd
    read_only = os.open(chat / "index" / "msg.loc", os.O_RDONLY)
    os.dup2(read_only, msg_fd)
    os.close(read_only)
    with pytest.raises(StoreError, match="index could not be updated"):
        store.append_message("user", "b", date=DAY1)
    with pytest.raises(StoreError, match="must be reopened"):
        store.append_message("user", "c", date=DAY1)
    store.close()
    with ChatStore.open(chat) as store:
        assert store.message_count == 2  # "b" was logged before the index failed
        assert store.read_message(1).text == "b"
        assert store.append_message("user", "c", date=DAY1) == 2


def test_the_index_is_checkpointed_every_so_many_appends(
    chat: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from evertalk.store import index

    monkeypatch.setattr(index, "CHECKPOINT_EVERY", 5)
    monkeypatch.setattr(index, "CLOSE_CHECKPOINT_AFTER", 3)
    with ChatStore.open(chat) as store:
        for k in range(12):
            store.append_message("user", f"m{k}", date=DAY1)
        meta = (chat / "index" / "meta.json").read_text()
        assert '"messages":11' in meta  # after the first (a new day file), then every 5
    # one new record is not worth a close's checkpoint: the next open scans it from the log
    assert '"messages":11' in (chat / "index" / "meta.json").read_text()
    with ChatStore.open(chat) as store:
        assert store.message_count == 12 and store.warnings == []
        assert '"messages":11' in (chat / "index" / "meta.json").read_text()  # nor an open's
        for k in range(12, 14):
            store.append_message("user", f"m{k}", date=DAY1)
    assert '"messages":14' in (chat / "index" / "meta.json").read_text()  # three are


def test_line_numbers_stay_right_across_tail_scans(chat: Path) -> None:
    path = chat / "main" / "2026-01-01.jsonl"
    with ChatStore.open(chat) as store:
        store.append_message("user", "one", date=DAY1)
        store.append_message("user", "two", date=DAY1)
    with path.open("ab") as file:
        file.write(b'{"torn')
    with ChatStore.open(chat) as store:
        assert f"{path} line 3" in store.warnings[0]
        store.append_message("user", "three", date=DAY1)
    with path.open("ab") as file:
        file.write(b"garbage\n" + line(3))
    with ChatStore.open(chat) as store:
        assert store.warnings == [f"{path} line 5: not valid JSON; skipped"]
        assert store.read_message(3).text == "m3"
