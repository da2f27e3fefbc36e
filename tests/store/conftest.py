"""Fixtures shared by the store's tests: real folders in tmp_path, no mocks."""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest
import store_helpers

from evertalk.store import ChatStore


@pytest.fixture
def chat(tmp_path: Path) -> Path:
    return tmp_path / "home" / "chat"


@pytest.fixture
def count_fsyncs(monkeypatch: pytest.MonkeyPatch) -> Callable[[], int]:
    """Counts calls of os.fsync from now on (it still syncs)."""
    calls = [0]
    real = os.fsync

    def counting(fd: int) -> None:
        calls[0] += 1
        real(fd)

    monkeypatch.setattr(os, "fsync", counting)
    return lambda: calls[0]


@pytest.fixture
def snapshot() -> Callable[[Path], dict[str, tuple[int, bytes]]]:
    return store_helpers.snapshot


@pytest.fixture
def crash() -> Callable[[ChatStore], None]:
    return store_helpers.crash
