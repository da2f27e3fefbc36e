"""The terminal app's tests run on asyncio (Textual's loop), with no provider variables set,
and most on a home whose config.toml names the fake's provider (`home`)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from tui_support import write_config

CLEAN = ("EVERTALK_", "ANTHROPIC_", "OPENAI_", "OPENROUTER_")


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith(CLEAN):
            monkeypatch.delenv(name)


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    write_config(home)
    return home
