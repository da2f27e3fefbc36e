"""Spending written to a home's ledger ahead of a test, as other windows' turns would have left it
(no tests of its own)."""

from __future__ import annotations

from pathlib import Path

from evertalk.ledger import Ledger, ledger_path
from evertalk.providers.base import Usage


def spent(home: Path, dollars: float, *, model: str) -> None:
    """Today's ledger says `dollars` were spent already, by one turn call on `model`."""
    with Ledger(ledger_path(home)) as ledger:
        ledger.record(
            role="turn",
            provider="anthropic",
            model=model,
            usage=Usage(input=1000, output=100),
            cost=dollars,
            duration_ms=1000,
        )
