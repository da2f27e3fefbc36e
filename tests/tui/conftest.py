"""The terminal app's tests run on asyncio (Textual's loop), with no provider variables set."""

from __future__ import annotations

import os

import pytest

CLEAN = ("EVERTALK_", "ANTHROPIC_", "OPENAI_", "OPENROUTER_")


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in list(os.environ):
        if name.startswith(CLEAN):
            monkeypatch.delenv(name)
