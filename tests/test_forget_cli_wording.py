"""`evertalk memory forget` as a user reads it: counts agree with their nouns, no search rows are
promised when there is no search index, no cost is put as "about 0 model calls", and a message
past the end is named by what the chat holds."""

from __future__ import annotations

from pathlib import Path

import pytest

from evertalk.chat import Chat
from evertalk.cli import main
from home_config import write_config


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    write_config(home)
    with Chat.open(home / "chat") as chat:
        chat.append("user", "the door code is 4411")
        chat.append("ever", "Noted.")
    return home


def forget(home: Path, *words: str) -> int:
    return main(["memory", "forget", *words, "--yes", "--home", str(home)])


def test_one_message_forgotten_reads_as_one(home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert forget(home, "0") == 0
    out = capsys.readouterr().out
    assert not [line for line in out.splitlines() if line.startswith("Search index")]
    (cost,) = [line for line in out.splitlines() if line.startswith("Cost: ")]
    assert cost.startswith("Cost: no model calls; the next turn writes the prompt cache again")
    (done,) = [line for line in out.splitlines() if line.startswith("Done: ")]
    assert done.startswith("Done: 1 message changed, ")
    assert " 1 summaries" not in done and " 1 messages" not in done


def test_a_message_past_the_end_says_what_the_chat_holds(
    home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert forget(home, "62") == 1
    assert capsys.readouterr().err.strip() == "evertalk: the chat has 2 messages, 0–1"
