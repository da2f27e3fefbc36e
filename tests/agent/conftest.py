"""Fixtures shared by the agent's tests: a real chat, a tool context, a configured home."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from test_turn_support import write_config

from evertalk.agent.tools import ToolContext
from evertalk.chat import Chat


@pytest.fixture
def chat(tmp_path: Path) -> Iterator[Chat]:
    opened = Chat.open(tmp_path / "chat")
    try:
        yield opened
    finally:
        opened.close()


@pytest.fixture
def ctx(chat: Chat, tmp_path: Path) -> ToolContext:
    work = tmp_path / "work"
    work.mkdir()
    return ToolContext(chat=chat, workdir=work, agents_dir=tmp_path / "chat" / "agents")


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    write_config(home)
    return home
