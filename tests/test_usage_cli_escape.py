"""`evertalk usage` shows control characters escaped: a model's name in the ledger is text from
elsewhere (a server's answer, a hand-edited line), and must not drive the terminal (issue 34)."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

from evertalk.ledger import Ledger, ledger_path
from evertalk.providers.base import Usage

TITLE = "evil\x1b]0;TITLE\x07\x1b[2J"


def test_a_model_name_with_escape_sequences_is_shown_escaped(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    with Ledger(ledger_path(home)) as ledger:
        ledger.record(
            role="turn",
            provider="openai",
            model=TITLE,
            usage=Usage(10, 5, 0, 0),
            cost=0.01,
            duration_ms=100,
            date=datetime(2026, 10, 20, 12, tzinfo=UTC),
        )
    env = {k: v for k, v in os.environ.items() if not k.startswith("EVERTALK_")}
    env["EVERTALK_HOME"] = str(home)
    result = subprocess.run(
        [sys.executable, "-m", "evertalk", "usage"], capture_output=True, text=True, env=env
    )
    assert result.returncode == 0, result.stderr
    assert "\x1b" not in result.stdout and "\x07" not in result.stdout, result.stdout
    assert "evil\\x1b]0;TITLE\\x07\\x1b[2J" in result.stdout, result.stdout
