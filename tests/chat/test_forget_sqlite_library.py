"""A forget leaves no byte of what it took in the search database, whichever SQLite the index
runs on: one with FTS5's secure-delete (the bundled one) takes the rows' words out of the pages
they were in; an older one (the system's, on Debian 12) merges the whole index. Each run builds
and fixes up the database in processes of its own, as the commands do."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from forget_helpers import files_holding, make_chat

WORD = "zqpelican4410"
SEARCH = Path("chat/index/search.sqlite")


def _hide_bundled(folder: Path) -> str:
    """A folder that, first on the path, makes `import pysqlite3` fail as if not installed."""
    package = folder / "pysqlite3"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("raise ImportError('hidden by the test')\n")
    return str(folder)


def _evertalk(home: Path, path: str | None, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "HOME": str(home)}
    if path is not None:
        env["PYTHONPATH"] = os.pathsep.join([path, env.get("PYTHONPATH", "")])
    command = [sys.executable, "-m", "evertalk", *args, "--home", str(home)]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=120)


def _library(path: str | None) -> str:
    """The name of the SQLite module the search index would run on."""
    code = "from evertalk.store.sqlite_lib import sqlite3; print(sqlite3.__name__)"
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([path or "", os.environ.get("PYTHONPATH", "")]),
    }
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    return done.stdout.strip()


@pytest.mark.parametrize("library", ["bundled", "system"])
def test_no_byte_of_a_forgotten_message_stays_in_the_search_database(
    tmp_path: Path, library: str
) -> None:
    if library == "bundled":
        pytest.importorskip("pysqlite3", reason="the bundled SQLite is not installed here")
    home = tmp_path / "home"
    path = _hide_bundled(tmp_path / "hide") if library == "system" else None
    expected = "sqlite3" if library == "system" else "pysqlite3.dbapi2"
    assert _library(path) == expected
    make_chat(home, words={6: WORD})

    found = _evertalk(home, path, "memory", "search", WORD)
    assert found.returncode == 0, found.stderr
    assert WORD in found.stdout
    assert files_holding(home, WORD) != []

    forgot = _evertalk(home, path, "memory", "forget", "6", "--yes")
    assert forgot.returncode == 0, forgot.stderr
    assert (home / SEARCH).is_file()  # fixed up in place, not thrown away
    assert files_holding(home, WORD) == []
    again = _evertalk(home, path, "memory", "search", "deploy")
    assert again.returncode == 0, again.stderr
    assert "outdated" not in again.stderr and "damaged" not in again.stderr
