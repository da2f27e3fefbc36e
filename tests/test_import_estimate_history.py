"""The import preview's estimate, where the home has a history: its calls per node (follow-ups
included) and its cost per call come from the ledger, and messages already in the chat (a second
import of the same files) cost nothing."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from evertalk.chat import Chat
from evertalk.import_cli import calls_for, estimate
from evertalk.importers.model import Imported
from evertalk.ledger import Ledger, ledger_path
from evertalk.providers.base import Usage
from home_config import write_config

ZONE = timezone(timedelta(hours=2))
MEMORY_MODEL = "claude-haiku-4-5"


def configure(home: Path) -> None:
    write_config(home, model="claude-sonnet-4-5", memory_model=MEMORY_MODEL, api_key="sk-test")


def messages(count: int) -> list[Imported]:
    when = datetime(2026, 10, 1, 9, tzinfo=ZONE)
    return [
        Imported("user", f"message {i}: " + "backup " * 90, when, f"src:{i}", "test")
        for i in range(count)
    ]


def compaction_history(home: Path, nodes: int, calls_per_node: int, cost: float) -> None:
    with Ledger(ledger_path(home)) as ledger:
        for node in range(nodes):
            for call in range(calls_per_node):
                ledger.record(
                    role="compaction",
                    provider="anthropic",
                    model=MEMORY_MODEL,
                    usage=Usage(600, 150, 8000),
                    cost=cost,
                    duration_ms=1,
                    node=f"{node}+1",
                    failed=call < calls_per_node - 1,
                )


def test_the_ledgers_calls_per_node_and_cost_per_call_are_used(tmp_path: Path) -> None:
    home = tmp_path / "home"
    configure(home)
    compaction_history(home, nodes=40, calls_per_node=3, cost=0.004)
    found = messages(8)
    nodes = calls_for([600] * 8)  # 8 leaves, 4 + 2 + 1 merges
    guess = estimate(home, found)
    assert guess.calls == 3 * nodes
    assert guess.cost == pytest.approx(3 * nodes * 0.004)


def test_messages_already_in_the_chat_are_estimated_at_nothing(tmp_path: Path) -> None:
    home = tmp_path / "home"
    configure(home)
    found = messages(8)
    with Chat.open(home / "chat") as chat:
        for message in found:
            chat.append(message.kind, message.text, key=message.key)
    guess = estimate(home, found)
    assert guess.calls == 0 and guess.cost in (0.0, None) and guess.seconds == 0
