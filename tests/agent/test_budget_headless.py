"""A daily budget through the command line: `-p` refuses a turn that would start over it unless
`--over-budget`; `usage` shows the day against it; past 1.5 times it the compactor pauses, and
says so."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from test_turn_support import MODEL, log_of

from fakes import AnthropicFake
from fakes import chat as answer
from served_home import fake, run, served_home
from spending import spent

__all__ = ["fake"]  # the fixture, used by name

LONG = "A message long enough to need a summary of its own. " * 20


@pytest.fixture
def home(tmp_path: Path, fake: AnthropicFake) -> Iterator[Path]:
    with served_home(tmp_path, fake) as home:
        with (home / "config.toml").open("a") as config:
            config.write("\n[budget]\ndaily = 5.00\n")
        yield home


def test_a_turn_over_the_budget_is_refused_unless_asked_for(
    home: Path, fake: AnthropicFake
) -> None:
    fake.behaviour.push(answer("Within budget."), answer("Over it, as asked."))  # type: ignore[attr-defined]
    spent(home, 4.99, model=MODEL)
    assert run(home, "-p", "one more").stdout == "Within budget.\n"
    spent(home, 0.50, model=MODEL)
    refused = run(home, "-p", "and another")
    assert refused.returncode == 1 and refused.stdout == ""
    # the first turn's own calls count too (a cent or so, by the ledger's prices)
    assert re.fullmatch(
        r"evertalk: not sent: today's spending, \$5\.\d\d, is over the daily budget of \$5\.00 "
        r"\(\[budget\] daily in config\.toml\); --over-budget sends it all the same\n",
        refused.stderr,
    )
    assert [text for kind, text in log_of(home) if kind == "user"] == ["one more"]
    allowed = run(home, "-p", "and another", "--over-budget")
    assert (allowed.returncode, allowed.stdout) == (0, "Over it, as asked.\n"), allowed.stderr
    assert run(home, "--over-budget").returncode == 2  # it goes with -p


def test_usage_shows_the_day_against_the_budget(home: Path) -> None:
    spent(home, 1.25, model=MODEL)
    result = run(home, "usage")
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == (
        "today: $1.25 of the daily budget of $5.00 (25%); $3.75 left"
    )
    figures = json.loads(run(home, "usage", "--json").stdout)
    assert figures["budget"] == {"daily": 5.0, "today": 1.25}
    spent(home, 4.00, model=MODEL)
    assert run(home, "usage").stdout.splitlines()[-1] == (
        "today: $5.25 of the daily budget of $5.00 (105%); a turn asks first (-p: --over-budget)"
    )


def test_the_compactor_pauses_past_one_and_a_half_times_the_budget(
    home: Path, fake: AnthropicFake
) -> None:
    fake.behaviour.push(answer("Noted, and summaries wait."))  # type: ignore[attr-defined]
    spent(home, 7.50, model=MODEL)
    result = run(home, "-p", LONG, "--over-budget")
    assert result.returncode == 0, result.stderr
    assert "memory: summaries are paused: today's spending, $7.50, is past 1.5× the daily " in (
        result.stderr
    )
    status = json.loads(run(home, "memory", "status", "--json").stdout)
    assert status["compactor"]["calls"] == 0, status
    assert not [r for r in fake.records if r.body and r.body.get("tool_choice") == {"type": "none"}]
