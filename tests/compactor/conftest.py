"""Fixtures of the compactor's integration tests."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

SHM = Path("/dev/shm")


@pytest.fixture
def home(tmp_path: Path) -> Iterator[Path]:
    """An evertalk home folder, on tmpfs where there is one.

    Every append and every built node is fsynced (SPEC §1.3); on a disk an fsync costs a few
    milliseconds, and a chat of 2,000 messages makes about 10,000 of them. Durability is not what
    these tests check (tests/chat/test_crash.py does), so they run where an fsync is free. Without
    /dev/shm they run in pytest's tmp_path, only slower.
    """
    if SHM.is_dir():
        folder = Path(tempfile.mkdtemp(prefix="evertalk-compactor-", dir=SHM))
        try:
            yield folder
        finally:
            shutil.rmtree(folder, ignore_errors=True)
    else:
        folder = tmp_path / "home"
        folder.mkdir()
        yield folder
