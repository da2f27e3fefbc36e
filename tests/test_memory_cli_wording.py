"""`evertalk memory status` on a chat of one message: each count agrees with its noun (`1 line`,
not `1 lines`)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from evertalk.chat import Chat
from evertalk.memory_cli import format_status

DISAGREE = re.compile(r"(?<![\d,])1 (lines|bytes|leaves|merges|messages)\b")


@pytest.fixture
def chat_dir(tmp_path: Path) -> Path:
    with Chat.open(tmp_path / "home" / "chat") as chat:
        chat.append("user", "hi")
    return tmp_path / "home" / "chat"


def test_the_status_of_one_message_reads_as_one(chat_dir: Path) -> None:
    with Chat.open(chat_dir, readonly=True) as chat:
        status = chat.status()
    shown = format_status(status)
    assert status.view_lines == 1 and "1 line," in shown
    assert not DISAGREE.search(shown), shown
