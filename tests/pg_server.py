"""A throwaway PostgreSQL server for the tests: `initdb` and `pg_ctl` in a temporary folder.

The server listens on a free loopback port and on a unix socket in its own folder, with a
random superuser password (scram-sha-256 over TCP), and goes with its folder at the end. No
system service, no root: initdb refuses to run as root, so under root (a CI container) the
server's commands run as `nobody`, which owns the folder.
"""

from __future__ import annotations

import contextlib
import grp
import os
import pwd
import re
import secrets
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import quote

SUPERUSER = "postgres"
UNPRIVILEGED = ("nobody", "nogroup")


def find_binaries() -> Path | None:
    """The folder of initdb and pg_ctl: on PATH, or Debian's (not on PATH), newest first."""
    found = shutil.which("initdb")
    if found is not None and (Path(found).parent / "pg_ctl").exists():
        return Path(found).parent
    debian = Path("/usr/lib/postgresql")
    versions = sorted(
        (d for d in debian.glob("*/bin") if d.parent.name.isdigit()),
        key=lambda d: int(d.parent.name),
        reverse=True,
    )
    return next((d for d in versions if (d / "initdb").exists() and (d / "pg_ctl").exists()), None)


def missing() -> str | None:
    """Why no server can be run here, or None."""
    if find_binaries() is None:
        return "PostgreSQL's initdb and pg_ctl are not installed (Debian: the postgresql package)"
    if os.geteuid() == 0 and shutil.which("setpriv") is None:
        return "running as root, and setpriv (to run the server as nobody) is missing"
    return None


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class PgServer:
    root: Path
    bin: Path
    password: str = field(default_factory=lambda: secrets.token_hex(12))
    port: int = 0
    passwords: dict[str, str] = field(default_factory=dict)

    @property
    def data(self) -> Path:
        return self.root / "data"

    @property
    def socket_dir(self) -> Path:
        return self.root / "socket"

    def url(self, database: str = "postgres", role: str = SUPERUSER) -> str:
        """The URL of `database` as `role` (a role made by `create_role`, or the superuser)."""
        password = self.password if role == SUPERUSER else self.passwords[role]
        return f"postgresql://{role}:{quote(password)}@127.0.0.1:{self.port}/{database}"

    def _run(self, *command: str) -> None:
        prefix: list[str] = []
        if os.geteuid() == 0:
            user, group = UNPRIVILEGED
            prefix = ["setpriv", f"--reuid={user}", f"--regid={group}", "--clear-groups"]
        done = subprocess.run(
            [*prefix, *command], cwd=self.root, capture_output=True, text=True, timeout=120
        )
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(command[:2])} failed: {done.stderr or done.stdout}")

    def _give_away(self) -> None:
        """Under root: the server's user owns its folder (initdb runs as that user)."""
        if os.geteuid() != 0:
            return
        uid, gid = pwd.getpwnam(UNPRIVILEGED[0]).pw_uid, grp.getgrnam(UNPRIVILEGED[1]).gr_gid
        for path in (self.root, self.socket_dir, self.root / "password"):
            os.chown(path, uid, gid)

    def init(self) -> None:
        self.socket_dir.mkdir()
        (self.root / "password").write_text(self.password + "\n")
        self._give_away()
        self._run(
            str(self.bin / "initdb"),
            "--pgdata", str(self.data),
            "--username", SUPERUSER,
            "--pwfile", str(self.root / "password"),
            "--auth-local", "trust",
            "--auth-host", "scram-sha-256",
            "--encoding", "UTF8",
            "--no-locale",
            "--no-sync",
        )  # fmt: skip

    settings = "-c fsync=off -c full_page_writes=off -c max_connections=60"
    """The tests run faster without waiting for the disk; a bench that times commits turns
    fsync back on."""

    def start(self) -> None:
        """Start the server on a free port; `-w` returns once it accepts connections. Another
        program may take the port between the probe and the start: then a new one is tried."""
        for attempt in range(3):
            self.port = _free_port()
            try:
                self._pg_ctl_start()
                return
            except RuntimeError:
                if attempt == 2 or not self._port_taken():
                    raise RuntimeError(f"the server did not start: {self.log_tail()}") from None

    def _pg_ctl_start(self) -> None:
        options = (
            f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.socket_dir} {self.settings}"
        )
        self._run(
            str(self.bin / "pg_ctl"), "start", "-w", "-t", "60",
            "-D", str(self.data), "-l", str(self.root / "server.log"), "-o", options,
        )  # fmt: skip

    def _port_taken(self) -> bool:
        return "could not bind" in self.log_tail() or "in use" in self.log_tail()

    def log_tail(self) -> str:
        try:
            return "\n".join((self.root / "server.log").read_text().splitlines()[-10:])
        except OSError:
            return "(no log)"

    def stop(self) -> None:
        """Stop the server (if it started) and remove its folder."""
        try:
            if self.port:
                self._run(
                    str(self.bin / "pg_ctl"), "stop", "-w", "-m", "fast", "-D", str(self.data)
                )
        finally:
            shutil.rmtree(self.root, ignore_errors=True)

    # Faults, for the tests of a server that goes away (a server of their own: the session's
    # is shared by every test)

    def shut_down(self) -> None:
        """Stop the server as an administrator would (`pg_ctl stop -m fast`: its connections
        are ended, its data checkpointed), keeping its folder for `start_again`."""
        self._run(str(self.bin / "pg_ctl"), "stop", "-w", "-m", "fast", "-D", str(self.data))

    def kill(self) -> None:
        """Kill the server as a crash would: SIGKILL to the postmaster and to every process of
        it, nothing flushed or checkpointed; returns once they are all dead.

        Where nothing reaps them (a container's init), the dead stay as zombies, which the next
        postmaster would take for a live one by the pid in its lock files (`postmaster.pid`,
        and the socket's): they are removed, as a reboot would leave no such process."""
        postmaster = self._postmaster_pid()
        assert postmaster is not None and _alive(postmaster), "the server is not running"
        children = [pid for pid in _pids() if _parent(pid) == postmaster]
        for pid in [postmaster, *children]:  # the postmaster first, or it restarts the others
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
        deadline = time.monotonic() + 30
        while any(_alive(pid) for pid in [postmaster, *children]):
            assert time.monotonic() < deadline, "the server's processes outlived SIGKILL"
            time.sleep(0.01)
        (self.data / "postmaster.pid").unlink()
        (self.socket_dir / f".s.PGSQL.{self.port}.lock").unlink(missing_ok=True)

    def start_again(self) -> None:
        """Start the server on its port again, after `shut_down` or `kill` (then it recovers
        from its write-ahead log before it takes connections)."""
        try:
            self._pg_ctl_start()
        except RuntimeError:
            raise RuntimeError(f"the server did not start again: {self.log_tail()}") from None

    def running(self) -> bool:
        pid = self._postmaster_pid()
        return pid is not None and _alive(pid)

    def _postmaster_pid(self) -> int | None:
        try:
            return int((self.data / "postmaster.pid").read_text().split()[0])
        except (OSError, IndexError, ValueError):
            return None

    def _admin(self, statement: str) -> None:
        import psycopg

        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(statement.encode("utf-8"))

    def create_database(self, name: str) -> str:
        """A new empty database; its URL as the superuser."""
        _check_name(name)
        self._admin(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def create_role(self, name: str) -> str:
        """A new role that may log in (no superuser, no BYPASSRLS); its password."""
        _check_name(name)
        password = secrets.token_hex(12)
        self._admin(f"CREATE ROLE \"{name}\" LOGIN PASSWORD '{password}'")
        self.passwords[name] = password
        return password


def _pids() -> list[int]:
    return [int(entry) for entry in os.listdir("/proc") if entry.isdigit()]


def _stat(pid: int) -> list[str] | None:
    """The fields of /proc/PID/stat after the command's name (state, parent, …), or None."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None


def _parent(pid: int) -> int | None:
    fields = _stat(pid)
    return int(fields[1]) if fields is not None else None


def _alive(pid: int) -> bool:
    """Whether the process runs (a zombie is dead: it only waits to be reaped)."""
    fields = _stat(pid)
    return fields is not None and fields[0] not in ("Z", "X")


def _check_name(name: str) -> None:
    if not re.fullmatch(r"[a-z_][a-z0-9_]{0,62}", name):
        raise ValueError(f"{name!r} is not a plain identifier")


def start_server() -> PgServer:
    """A running server in a new temporary folder (under /tmp: a unix socket's path is short)."""
    binaries = find_binaries()
    assert binaries is not None
    server = PgServer(Path(tempfile.mkdtemp(prefix="evertalk-pg-", dir="/tmp")), binaries)
    try:
        server.init()
        server.start()
    except BaseException:
        server.stop()
        raise
    return server
