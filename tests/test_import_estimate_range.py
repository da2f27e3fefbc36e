"""The summaries' estimate holds: calls per node as this chat's compactor models needed them in
the ledger (1.7 without a history, as real imports take), a range around the likeliest figure,
and a cost per call at the sizes compactions really have. Two real imports on the default
compactor model with no history before them are the yardstick: 5,993 nodes took 10,343 calls
and cost $4.28; 41 nodes took 73 calls."""

from __future__ import annotations

from pathlib import Path

import pytest

from evertalk.import_cli import Estimate, preview
from evertalk.importers.model import Reading
from evertalk.ledger import Ledger, ledger_path
from evertalk.providers.base import Usage
from evertalk.summary_cost import summary_calls, summary_estimate
from home_config import write_config
from test_import_estimate_history import messages

MEMORY_MODEL = "claude-haiku-5-5"  # the default compactor model, whose price the $4.28 is at
IMPORTS = [(5_993, 10_343, 4.28), (41, 73, None)]  # nodes, calls made, their cost


def configure(home: Path, memory_model: str = MEMORY_MODEL) -> None:
    write_config(home, model="claude-sonnet-5-5", memory_model=memory_model, api_key="sk-test")


def history(home: Path, model: str, nodes: int, calls: int) -> None:
    """`calls` compaction calls of `model` that built `nodes` nodes (the others failed)."""
    with Ledger(ledger_path(home)) as ledger:
        for call in range(calls):
            node = call % nodes
            ledger.record(
                role="compaction",
                provider="anthropic",
                model=model,
                usage=Usage(1200, 350, 8000),
                cost=0.0004,
                duration_ms=1,
                node=f"{node}+1",
                failed=call >= nodes,  # each node built once, the calls after it follow-ups
            )


@pytest.mark.parametrize(("nodes", "made", "dollars"), IMPORTS)
def test_without_a_history_the_likeliest_figures_are_within_30_percent(
    tmp_path: Path, nodes: int, made: int, dollars: float | None
) -> None:
    configure(tmp_path)
    calls, cost = summary_calls(tmp_path, nodes)
    assert abs(calls - made) <= 0.3 * made
    if dollars is not None:
        assert cost is not None and abs(cost - dollars) <= 0.3 * dollars


@pytest.mark.parametrize(("nodes", "made", "dollars"), IMPORTS)
def test_without_a_history_the_range_holds_what_the_imports_took(
    tmp_path: Path, nodes: int, made: int, dollars: float | None
) -> None:
    configure(tmp_path)
    guess = summary_estimate(tmp_path, nodes)
    assert nodes <= guess.low <= made <= guess.high <= 1.5 * made
    assert guess.low <= guess.calls <= guess.high
    if dollars is not None:
        assert guess.low_cost is not None and guess.high_cost is not None
        assert guess.low_cost <= dollars <= guess.high_cost <= 1.5 * dollars


def test_the_ledgers_calls_per_built_node_are_the_likeliest(tmp_path: Path) -> None:
    configure(tmp_path)
    history(tmp_path, MEMORY_MODEL, nodes=100, calls=250)
    guess = summary_estimate(tmp_path, 1_000)
    assert guess.calls == 2_500
    assert guess.low < 2_500 < guess.high
    assert guess.cost == pytest.approx(2_500 * 0.0004)


def test_another_compactor_models_history_stands_in_for_a_new_ones(tmp_path: Path) -> None:
    configure(tmp_path)
    history(tmp_path, "claude-haiku-4-5", nodes=100, calls=130)  # the model before the change
    assert summary_estimate(tmp_path, 1_000).calls == 1_300


def test_a_short_history_leaves_the_default(tmp_path: Path) -> None:
    configure(tmp_path)
    history(tmp_path, MEMORY_MODEL, nodes=5, calls=20)  # too few nodes to say much
    assert summary_estimate(tmp_path, 1_000).calls == 1_700


def test_the_preview_says_the_range(tmp_path: Path) -> None:
    guess = Estimate(calls=10_188, low=8_354, high=12_022, cost=3.8, low_cost=3.1, high_cost=4.5)
    line = next(line for line in preview(Reading(), messages(3), guess) if "compaction" in line)
    assert line.startswith("summaries    about 8,400–12,000 compaction calls, $3.10–$4.50, ")
    unknown = Estimate(calls=70, low=57, high=83, cost=None, low_cost=None, high_cost=None)
    line = next(line for line in preview(Reading(), messages(3), unknown) if "compaction" in line)
    assert line.startswith("summaries    about 57–83 compaction calls, price unknown, ")
