"""A read-only open that had to scan the log saves the index, when nobody owns the chat.

`evertalk memory status` opens read-only. On a chat another program wrote, or whose index was
deleted, it used to rebuild the index in memory at every run (29 s at a million messages); now
the first run saves it, under the chat's lock, as the owner would have.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Callable
from pathlib import Path

from store_helpers import lock_held
from test_index import DAYS, build_chat, state

from evertalk.store import ChatStore
from evertalk.store.lock import read_owner
from evertalk.store.records import encode_message, encode_node

Snapshot = Callable[[Path], dict[str, tuple[int, bytes]]]


def outside_index(files: dict[str, tuple[int, bytes]]) -> dict[str, tuple[int, bytes]]:
    """Everything but the index and the lock (which names the last process that held it)."""
    return {
        name: entry
        for name, entry in files.items()
        if name != "lock" and name != "index" and not name.startswith("index/")
    }


def write_elsewhere(chat: Path, first: int, count: int) -> None:
    """Messages and their free leaves appended by another program, with no index update."""
    date = "2026-03-01T09:30:00-05:00"
    with (chat / "main" / "2026-03-01.jsonl").open("ab") as file:
        for i in range(first, first + count):
            file.write(encode_message(i, "note", f"m{i}", date, key=f"other{i}") + b"\n")
    with (chat / "tree" / "2026-03-01.jsonl").open("ab") as file:
        for i in range(first, first + count):
            file.write(encode_node(0, i, f"note: m{i}", 2) + b"\n")


def test_a_reader_saves_the_index_it_rebuilt(chat: Path, snapshot: Snapshot) -> None:
    with ChatStore.open(chat) as store:
        build_chat(store)
        before = state(store)
    shutil.rmtree(chat / "index")
    log = outside_index(snapshot(chat))
    with ChatStore.open(chat, readonly=True) as reader:
        assert reader.warnings == [f"rebuilding the index of {chat}: there is no index yet"]
        assert state(reader) == before
    saved = snapshot(chat / "index")
    assert "meta.json" in saved and read_owner(chat) is None  # the lock was let go
    with ChatStore.open(chat, readonly=True) as reader:  # the next reader finds it
        assert reader.warnings == []
        assert state(reader) == before
    assert snapshot(chat / "index") == saved
    assert outside_index(snapshot(chat)) == log  # the log and the views untouched
    with ChatStore.open(chat) as store:  # the owner takes it as its own, keys included
        assert store.warnings == []
        assert store.append_message("user", "again", key="key7") == 7
        assert state(store) == before


def test_a_reader_saves_what_another_program_appended(chat: Path, snapshot: Snapshot) -> None:
    with ChatStore.open(chat) as store:
        for k in range(3):
            store.append_message("user", f"m{k}", date=DAYS[0])
    write_elsewhere(chat, 3, 40)
    with ChatStore.open(chat, readonly=True) as reader:
        assert reader.warnings == []
        assert reader.message_count == 43
        assert reader.read_node(0, 42).text == "note: m42"  # type: ignore[union-attr]
    assert '"messages":43' in (chat / "index" / "meta.json").read_text()
    saved = snapshot(chat / "index")
    with ChatStore.open(chat, readonly=True) as reader:
        assert reader.message_count == 43
    assert snapshot(chat / "index") == saved
    with ChatStore.open(chat) as store:
        assert store.append_message("note", "again", key="other40") == 40


def test_a_reader_beside_the_owner_writes_nothing(chat: Path, snapshot: Snapshot) -> None:
    with ChatStore.open(chat) as owner:
        for k in range(3):
            owner.append_message("user", f"m{k}", date=DAYS[0])
        owner.checkpoint()
        write_elsewhere(chat, 3, 5)
        before = snapshot(chat)
        with ChatStore.open(chat, readonly=True) as reader:
            assert reader.message_count == 8  # scanned in memory
            assert reader.read_message(7).text == "m7"
        assert snapshot(chat) == before
        shutil.rmtree(chat / "index")
        before = snapshot(chat)
        with ChatStore.open(chat, readonly=True) as reader:
            assert any("rebuilding the index" in w for w in reader.warnings)
            assert reader.message_count == 8
        assert snapshot(chat) == before
        (chat / "index").mkdir()  # for the owner's close


def test_a_reader_leaves_a_damaged_log_to_the_owner(chat: Path, snapshot: Snapshot) -> None:
    """Damage is the owner's to report and index: every reader warns, and writes nothing."""
    with ChatStore.open(chat) as store:
        build_chat(store)
        before = state(store)
    path = chat / "main" / "2026-03-02.jsonl"
    path.write_bytes(path.read_bytes() + b"GARBAGE\n")
    shutil.rmtree(chat / "index")
    files = snapshot(chat)
    for _ in range(2):
        with ChatStore.open(chat, readonly=True) as reader:
            assert f"{path} line 8: not valid JSON; skipped" in reader.warnings
            assert state(reader) == before
        assert snapshot(chat) == files
    with ChatStore.open(chat) as store:
        assert f"{path} line 8: not valid JSON; skipped" in store.warnings
    with ChatStore.open(chat, readonly=True) as reader:
        assert reader.warnings == []


def test_a_reader_of_records_to_set_aside_moves_nothing(chat: Path, snapshot: Snapshot) -> None:
    with ChatStore.open(chat) as store:
        build_chat(store, 4)
    with (chat / "tree" / "2026-03-01.jsonl").open("ab") as file:
        file.write(encode_node(1, 7, "summarized messages since lost", 1) + b"\n")
    files = snapshot(chat)
    with ChatStore.open(chat, readonly=True) as reader:
        assert any("past the end of the log; skipped" in w for w in reader.warnings)
    assert snapshot(chat) == files
    with lock_held(chat), ChatStore.open(chat, readonly=True) as reader:
        assert any("past the end of the log; skipped" in w for w in reader.warnings)
    assert snapshot(chat) == files


_NOT_WRITABLE = textwrap.dedent(
    """
    import os, sys
    from pathlib import Path
    from evertalk.store import ChatStore
    from evertalk.store import fast_lines  # loaded by the first scan: here, before the setuid
    from evertalk.store import scan  # loaded by the first open that scans or writes: as well
    from evertalk.store.records import encode_message
    chat = Path(sys.argv[1])
    if len(sys.argv) > 2:  # root writes through any mode: become someone else, imports done
        os.setgid(int(sys.argv[3]))
        os.setuid(int(sys.argv[2]))
    with ChatStore.open(chat) as store:
        store.append_message("user", "hi")
    [day] = (chat / "main").iterdir()
    with day.open("ab") as file:  # another program's line: the index is behind
        file.write(encode_message(1, "note", "more", "2026-03-01T09:30:00-05:00") + b"\\n")
    for path in [chat, *chat.rglob("*")]:
        os.chmod(path, 0o500 if path.is_dir() else 0o400)
    with ChatStore.open(chat, readonly=True) as reader:
        print(reader.message_count, reader.read_message(1).text)
    """
)


def test_a_reader_that_may_not_write_scans_in_memory(tmp_path: Path) -> None:
    home = tmp_path
    args = [sys.executable, "-c", _NOT_WRITABLE]
    if os.geteuid() == 0:
        nobody = pwd.getpwnam("nobody")
        home = Path(tempfile.mkdtemp(prefix="evertalk-ro-", dir="/tmp"))
        os.chown(home, nobody.pw_uid, nobody.pw_gid)
        args += [str(home / "chat"), str(nobody.pw_uid), str(nobody.pw_gid)]
    else:
        args.append(str(home / "chat"))
    try:
        run = subprocess.run(args, capture_output=True, text=True, check=False)
        assert run.returncode == 0, run.stderr
        assert run.stdout == "2 more\n"
    finally:
        if os.geteuid() == 0:
            for path in [home, *home.rglob("*")]:
                os.chmod(path, 0o700)
            shutil.rmtree(home)


def test_a_reader_saves_the_index_the_owner_would_have(tmp_path: Path) -> None:
    index_files = []
    for readonly in (True, False):
        chat = tmp_path / str(readonly) / "chat"
        with ChatStore.open(chat) as store:
            build_chat(store)
        shutil.rmtree(chat / "index")
        with ChatStore.open(chat, readonly=readonly) as opened:
            assert len(opened.warnings) == 1
        files = sorted((chat / "index").iterdir())
        index_files.append({p.name: p.read_bytes() for p in files if p.suffix != ".json"})
    assert index_files[0].keys() == index_files[1].keys()
    assert {k: v for k, v in index_files[0].items() if k != "keys.db"} == {
        k: v for k, v in index_files[1].items() if k != "keys.db"
    }
