"""Fixtures shared by the agent's tests: a real chat, a tool context, a configured home, a
folder outside the tools' reach."""

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


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    """A folder beside the working folder, with a file the tools must not reach."""
    folder = tmp_path / "outside"
    folder.mkdir()
    (folder / "victim.txt").write_text("precious\n")
    return folder
