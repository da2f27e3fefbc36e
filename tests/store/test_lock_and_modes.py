"""The owner's lock and private permissions (SPEC §1.7)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest

from evertalk.store import ChatLocked, ChatStore, SavedViews
from evertalk.store.lock import ChatLock, read_owner
from evertalk.store.secure import make_dir, open_file, write_atomic


@pytest.fixture
def hostile_umask() -> Iterator[None]:
    """A umask that would strip the owner's own bits: creation must not depend on it."""
    old = os.umask(0o277)
    try:
        yield
    finally:
        os.umask(old)


def test_secure_helpers_ignore_the_umask(tmp_path: Path, hostile_umask: None) -> None:
    assert make_dir(tmp_path / "a" / "b")
    assert not make_dir(tmp_path / "a" / "b")
    fd, created = open_file(tmp_path / "a" / "f", os.O_WRONLY)
    os.close(fd)
    write_atomic(tmp_path / "a" / "g", b"data")
    assert created
    modes = {p.name: p.stat().st_mode & 0o777 for p in (tmp_path / "a").rglob("*")}
    assert modes == {"b": 0o700, "f": 0o600, "g": 0o600}
    assert (tmp_path / "a").stat().st_mode & 0o777 == 0o700


def test_everything_a_store_creates_is_private(chat: Path, hostile_umask: None) -> None:
    with ChatStore.open(chat) as store:
        for k in range(3):
            store.append_message("user", f"m{k}", key=f"k{k}")
        store.append_node(0, 0, "user: m0", 2)
        store.append_node(1, 0, "x", 1)
        store.save_views(SavedViews(3, [(1, 0), (0, 2)], [(1, 0), (0, 2)], False, False))
    with ChatStore.open(chat) as store:  # a tail scan and a checkpoint
        store.append_message("ever", "again")
    paths = [chat.parent, chat, *chat.rglob("*")]
    assert len(paths) > 12
    for path in paths:
        expected = 0o700 if path.is_dir() else 0o600
        assert path.stat().st_mode & 0o777 == expected, path


def test_a_second_process_is_refused_with_the_owners_pid(chat: Path) -> None:
    script = textwrap.dedent(
        """
        import sys
        from pathlib import Path
        from evertalk.store import ChatLocked, ChatStore
        try:
            ChatStore.open(Path(sys.argv[1]))
        except ChatLocked as error:
            print(error.pid)
            print(error)
        else:
            print("opened")
        """
    )
    with ChatStore.open(chat):
        run = subprocess.run(
            [sys.executable, "-c", script, str(chat)], capture_output=True, text=True, check=True
        )
        pid, message = run.stdout.splitlines()
        assert int(pid) == os.getpid()
        assert f"pid {os.getpid()}" in message and str(chat) in message
        assert read_owner(chat) == os.getpid()
    assert read_owner(chat) is None
    run = subprocess.run(
        [sys.executable, "-c", script, str(chat)], capture_output=True, text=True, check=True
    )
    assert run.stdout == "opened\n"


def test_the_same_process_cannot_open_twice(chat: Path) -> None:
    with ChatStore.open(chat), pytest.raises(ChatLocked) as caught:
        ChatStore.open(chat)
    assert caught.value.pid == os.getpid()
    ChatStore.open(chat).close()  # released on close


def test_the_lock_file_names_its_owner(tmp_path: Path) -> None:
    lock = ChatLock.acquire(tmp_path)
    assert (tmp_path / "lock").read_text() == f"{os.getpid()}\n"
    assert lock.held
    lock.release()
    assert not lock.held
    lock.release()  # idempotent
    assert read_owner(tmp_path) is None
    assert read_owner(tmp_path / "nowhere") is None


def test_a_read_only_open_takes_no_lock(chat: Path) -> None:
    with ChatStore.open(chat) as owner:
        owner.append_message("user", "hi")
        owner.checkpoint()
        with ChatStore.open(chat, readonly=True) as reader:
            assert reader.message_count == 1
            assert reader.read_message(0).text == "hi"
