"""A deep home's socket lives in `<tmp>/evertalk-<uid>/`, a folder another local user could make
first and listen in. A client checks the folder (its own, 0700) and the listener's user before it
sends a byte (issue 23, "no way in"). A folder taken so does not keep the service from starting:
it listens in a private folder of its own, which the home records for every client (issue 34)."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from agent.test_turn_support import write_config
from evertalk.protocol.paths import (
    SOCKET_RECORD,
    peer_uid,
    shared_socket_path,
    socket_folder_problem,
    socket_path,
)

NOBODY = 65534


@dataclass
class Deep:
    """A home deep enough for its socket to go to `<tmpdir>/evertalk-<uid>/`."""

    tmpdir: Path
    home: Path

    @property
    def folder(self) -> Path:
        return self.tmpdir / f"evertalk-{os.getuid()}"

    @property
    def socket(self) -> Path:
        return self.folder / shared_socket_path(self.home).name

    def env(self, runtime_dir: Path | None = None) -> dict[str, str]:
        clean = ("EVERTALK_", "ANTHROPIC_", "OPENAI_", "OPENROUTER_", "XDG_RUNTIME_DIR")
        env = {k: v for k, v in os.environ.items() if not k.startswith(clean)}
        if runtime_dir is not None:
            env["XDG_RUNTIME_DIR"] = str(runtime_dir)
        return env | {"EVERTALK_HOME": str(self.home), "TMPDIR": str(self.tmpdir)}

    def run(self, *args: str, runtime_dir: Path | None = None) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "evertalk", *args],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            env=self.env(runtime_dir),
            cwd=self.home.parent,
            timeout=60,
        )


@pytest.fixture
def deep() -> Iterator[Deep]:
    base = Path(tempfile.mkdtemp(prefix="evertalk-trust-"))
    base.chmod(0o755)  # another user may reach its temporary directory
    tmpdir = base / "tmp"
    tmpdir.mkdir()
    tmpdir.chmod(0o1777)  # as /tmp is
    home = base / ("h" * 60) / ("h" * 60)
    write_config(home)
    assert len(os.fsencode(home / "service.sock")) > 100
    found = Deep(tmpdir, home)
    try:
        yield found
    finally:
        found.run("service", "stop")
        shutil.rmtree(base, ignore_errors=True)


class Impostor:
    """A listener on the deep home's socket, in a forked child running as `uid` (or as us): it
    reports every byte a client sends it through a pipe."""

    def __init__(self, deep: Deep, *, uid: int | None, make_folder: bool) -> None:
        folder, path = deep.folder, deep.socket  # named as the test's user sees them
        self.read_end, write_end = os.pipe()
        self.pid = os.fork()
        if self.pid == 0:  # pragma: no cover - the child reports through the pipe
            os.close(self.read_end)
            try:
                listen(folder if make_folder else None, path, uid, write_end)
            finally:
                os._exit(0)
        os.close(write_end)
        self.reader = os.fdopen(self.read_end, "rb")
        self.stopped = False
        if self.reader.readline() != b"ready\n":
            self.heard()
            raise AssertionError("the impostor could not listen")

    def heard(self) -> bytes:
        """What clients sent it; it is stopped."""
        if not self.stopped:
            self.stopped = True
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        with self.reader:
            return self.reader.read()


def listen(
    folder: Path | None, path: Path, uid: int | None, out: int
) -> None:  # pragma: no cover - runs in the forked child
    if uid is not None:
        os.setgid(uid)
        os.setuid(uid)
    if folder is not None:
        os.mkdir(folder, 0o700)
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(8)
    os.write(out, b"ready\n")
    while True:
        connection, _ = listener.accept()
        with connection:  # a client that connects and sends nothing has told it nothing
            os.write(out, connection.recv(65536))


needs_root = pytest.mark.skipif(
    os.getuid() != 0, reason="needs root to run the impostor as another user (nobody)"
)


def assert_refused(result: subprocess.CompletedProcess[str], *words: str) -> None:
    """The client said why in one line, and ran nothing."""
    assert result.returncode == 1, result
    assert result.stderr.count("\n") == 1, result.stderr
    for word in words:
        assert word in result.stderr, result.stderr


def served_elsewhere(deep: Deep, runtime_dir: Path | None = None) -> Path:
    """Start the home's service while its shared folder is taken: it listens in a private
    folder of this user's, recorded in the home, where a client finds it. That socket."""
    served = deep.run("serve", runtime_dir=runtime_dir)
    assert served.returncode == 0, served.stderr
    recorded = Path((deep.home / SOCKET_RECORD).read_text().strip())
    assert socket_path(deep.home) == recorded and recorded.parent != deep.folder
    assert f"on {recorded};" in served.stdout
    folder = recorded.parent.lstat()
    assert folder.st_uid == os.getuid() and stat.S_IMODE(folder.st_mode) == 0o700
    assert recorded.is_socket()
    status = deep.run("service", "status")  # another client, without XDG_RUNTIME_DIR
    assert status.returncode == 0 and str(recorded) in status.stdout, status
    return recorded


@needs_root
def test_a_folder_made_first_by_another_user_is_left_to_them(deep: Deep) -> None:
    impostor = Impostor(deep, uid=NOBODY, make_folder=True)
    try:
        assert deep.folder.stat().st_uid == NOBODY
        private = served_elsewhere(deep)
    finally:
        heard = impostor.heard()
    assert heard == b""  # not a byte: not the hello, not a request
    assert private.parent.parent == deep.tmpdir  # a folder of its own, named at random


@needs_root
def test_the_runtime_folder_serves_when_the_shared_one_is_taken(deep: Deep) -> None:
    runtime = deep.tmpdir / "run"
    runtime.mkdir(mode=0o700)
    deep.folder.mkdir()
    os.chown(deep.folder, NOBODY, NOBODY)
    private = served_elsewhere(deep, runtime)
    assert private.parent == runtime
    stopped = deep.run("service", "stop")
    assert stopped.returncode == 0, stopped.stderr
    again = deep.run("serve")  # the next start listens where the home says
    assert again.returncode == 0 and f"on {private};" in again.stdout, again


@needs_root
def test_a_listener_of_another_user_in_our_folder_is_refused(deep: Deep) -> None:
    """The folder passes (ours, 0700), the listener does not: its peer's user is checked."""
    deep.folder.mkdir(mode=0o700)
    deep.folder.chmod(0o777)  # long enough for the other user to bind its socket there
    impostor = Impostor(deep, uid=NOBODY, make_folder=False)
    deep.folder.chmod(0o700)
    try:
        assert socket_folder_problem(deep.socket) is None
        asked = deep.run("-p", "the secret plan")
    finally:
        heard = impostor.heard()
    assert heard == b""
    assert_refused(asked, "runs as another user", f"uid {NOBODY}")


@needs_root
def test_a_recorded_folder_another_user_took_since_is_replaced(deep: Deep) -> None:
    """The temporary directory was emptied, and another user made the recorded folder's name."""
    deep.folder.mkdir()
    os.chown(deep.folder, NOBODY, NOBODY)
    taken = deep.tmpdir / "evertalk-0-taken"
    taken.mkdir(mode=0o700)
    os.chown(taken, NOBODY, NOBODY)
    (deep.home / SOCKET_RECORD).write_text(f"{taken}/x.sock\n")
    private = served_elsewhere(deep)
    assert private.parent != taken and list(taken.iterdir()) == []


def test_a_folder_of_the_wrong_mode_is_left_alone(deep: Deep) -> None:
    deep.folder.mkdir()
    deep.folder.chmod(0o755)
    impostor = Impostor(deep, uid=None, make_folder=False)
    try:
        served_elsewhere(deep)
    finally:
        heard = impostor.heard()
    assert heard == b""


def test_a_folder_that_is_a_link_is_left_alone(deep: Deep, tmp_path: Path) -> None:
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir(mode=0o700)
    deep.folder.symlink_to(elsewhere, target_is_directory=True)
    served_elsewhere(deep)
    assert list(elsewhere.iterdir()) == []


def test_a_free_shared_folder_is_used_and_the_record_dropped(deep: Deep) -> None:
    """A record whose folder is gone (the temporary directory was emptied) is dropped: the
    shared folder serves again."""
    (deep.home / SOCKET_RECORD).write_text(str(deep.tmpdir / "gone" / "x.sock"))
    served = deep.run("serve")
    assert served.returncode == 0, served.stderr
    assert f"on {deep.socket};" in served.stdout
    assert not (deep.home / SOCKET_RECORD).exists()


def test_the_peer_of_a_socket_pair_is_this_user() -> None:
    left, right = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with left, right:
        assert peer_uid(left) in (os.getuid(), None)  # None: a system with no way to ask


def test_a_home_writable_by_others_is_refused(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    home.chmod(0o777)
    problem = socket_folder_problem(socket_path(home))
    assert problem is not None and "writable by others" in problem
    home.chmod(0o755)
    assert socket_folder_problem(socket_path(home)) is None
