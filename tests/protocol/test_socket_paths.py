"""Where a home's socket goes: beside the home, or, for a deep home, in a short folder of the
temporary directory, or of `/tmp` when that directory is deep too (a socket's path has room for
about a hundred bytes)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from evertalk.protocol.paths import MAX_SOCKET_PATH, shared_socket_path, socket_path


def test_a_shallow_home_keeps_its_socket(tmp_path: Path) -> None:
    home = Path("/tmp") / "h"
    assert socket_path(home) == home.resolve() / "service.sock"


def test_a_deep_home_in_a_deep_temporary_directory_gets_a_short_socket_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    deep_tmp = tmp_path / ("t" * 60)
    deep_tmp.mkdir()
    monkeypatch.setenv("TMPDIR", str(deep_tmp))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)  # read TMPDIR again
    home = tmp_path / ("h" * 80) / "home"
    path = socket_path(home)
    assert len(os.fsencode(path)) <= MAX_SOCKET_PATH
    assert path == Path("/tmp") / f"evertalk-{os.getuid()}" / path.name
    assert shared_socket_path(home) == path  # the service listens where the client looks
