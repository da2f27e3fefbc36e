"""`secret_env`: which variables are credentials, and a sealed process against the real `/proc`.

The sealed processes run as another user than the superuser (uid 65534 when the tests run as
root, else the tester), since the superuser may read any process's memory whatever it does."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

import evertalk
from evertalk import secret_env

SRC = Path(evertalk.__file__).parent.parent
KEY = "sk-ant-sealed-0123456789abcdef"
NOBODY = 65534


@pytest.mark.parametrize(
    "name",
    [
        "ANTHROPIC_API_KEY", "OPENAI_API_KEY", "ANTHROPIC_AUTH_TOKEN", "PGPASSWORD",
        "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "GITHUB_TOKEN", "GH_TOKEN", "NPM_TOKEN",
        "SSH_AUTH_SOCK", "DEPLOY_KEY", "SMTP_PASS", "MY_PRIVATE_KEY", "HF_TOKEN", "DB_PASSWD",
        "GOOGLE_APPLICATION_CREDENTIALS", "VAULT_SECRET",
    ],
)  # fmt: skip
def test_credentials_by_name(name: str) -> None:
    assert secret_env.looks_secret(name, "x")


@pytest.mark.parametrize(
    "name", ["PATH", "HOME", "PWD", "OLDPWD", "LANG", "TERM", "KEYTIMEOUT", "EDITOR", "GOPATH"]
)
def test_ordinary_variables(name: str) -> None:
    assert not secret_env.looks_secret(name, "/usr/bin")


@pytest.mark.parametrize(
    "value",
    [
        "sk-proj-abc",
        "ghp_abc",
        "github_pat_abc",
        "xoxb-1-2",
        "AKIAABCDEF",
        "postgresql://u:pw@db/x",
    ],
)
def test_credentials_by_value(value: str) -> None:
    assert secret_env.looks_secret("SOMETHING", value)
    assert not secret_env.looks_secret("DATABASE_URL", "postgresql://u@db/x")  # no password


def other_user() -> tuple[list[str], str] | None:
    """How to run a command as a user other than the superuser, and a Python that user can run
    (None when there is none: the superuser's own may lie in a folder closed to others)."""
    if os.geteuid() != 0:
        return [], sys.executable
    python = shutil.which("python3", path="/usr/bin:/bin")
    setpriv = shutil.which("setpriv")
    if python is None or setpriv is None:
        return None
    drop = [setpriv, f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
    probe = f"import sys; sys.path.insert(0, {str(SRC)!r}); import evertalk.secret_env"
    if subprocess.run([*drop, python, "-c", probe], capture_output=True).returncode != 0:
        return None
    return drop, python


@contextmanager
def started(sealed: bool) -> Iterator[tuple[int, list[str]]]:
    """A process as the other user, with KEY in its environment, sealed or not; its pid and how
    to run a command as that user."""
    found = other_user()
    if found is None:
        pytest.skip("no Python that a user other than root can run")
    drop, python = found
    code = (
        f"import sys; sys.path.insert(0, {str(SRC)!r}); from evertalk import secret_env; "
        f"{'secret_env.seal(); ' if sealed else ''}print('ready', flush=True); sys.stdin.read()"
    )
    env = {"PATH": "/usr/bin:/bin", "ANTHROPIC_API_KEY": KEY}
    process = subprocess.Popen(
        [*drop, python, "-c", code],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        env=env,
        text=True,
        cwd="/",
    )
    try:
        assert process.stdout is not None and process.stdout.readline() == "ready\n"
        yield process.pid, drop
    finally:
        process.kill()
        process.wait()


def read_as(drop: list[str], path: str) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([*drop, "cat", path], capture_output=True, check=False)


def test_an_unsealed_process_shows_its_key_to_its_user() -> None:
    """The attack this closes: the same user reads the environment of an ordinary process."""
    with started(sealed=False) as (pid, drop):
        assert KEY.encode() in read_as(drop, f"/proc/{pid}/environ").stdout


def test_a_sealed_process_closes_its_environment_and_memory() -> None:
    with started(sealed=True) as (pid, drop):
        for name in ("environ", "mem"):
            done = read_as(drop, f"/proc/{pid}/{name}")
            assert done.returncode != 0 and b"Permission denied" in done.stderr, name
        # the superuser (the tests' own user, often) still reads the environment: the key is
        # gone from it all the same
        assert KEY.encode() not in Path(f"/proc/{pid}/environ").read_bytes()
