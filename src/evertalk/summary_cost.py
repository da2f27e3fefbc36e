"""What building summaries will cost, said before it is done (an import's preview, the preview
of `memory forget`): the compactor's calls for a number of nodes that need one, and their price,
as a likeliest figure and a range around it.

The calls a node takes (follow-ups for a line too long or not true to its input, retries) are
the ledger's: the current compactor model's, else the chat's earlier compactor models'; without
such a history, what real imports took. Each call costs what the ledger says this model's calls
cost, else typical sizes at the price table's rates.

Standard library only at import time, like the commands that use it: the preview must come fast.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Final

CALL_CONTEXT_TOKENS: Final = 8_000  # a compaction's cached prefix and context (SPEC §3.7)
CALL_INPUT_TOKENS: Final = 1_200  # the node's own input, new each call (a follow-up's is more)
CALL_OUTPUT_TOKENS: Final = 350  # the reply: a line, longer when it must be asked again
"""Sizes that price a call of the default compactor model as real imports paid: 10,343 calls
of claude-haiku-5-5 cost $4.28, $0.00041 each."""
CALLS_PER_NODE: Final = 1.7
"""Calls per node without a history: those imports took 1.73 and 1.78."""
LOW, HIGH = 0.82, 1.18
"""The range around the likeliest figure, as shares of it."""


@dataclass(frozen=True)
class SummaryEstimate:
    calls: int
    """The likeliest count of calls."""
    low: int
    high: int
    cost: float | None
    """USD at `calls`; None when the compactor model's price is unknown."""
    low_cost: float | None
    high_cost: float | None


def summary_calls(home: Path, nodes: int) -> tuple[int, float | None]:
    """The likeliest calls that building `nodes` summaries takes, and their cost in USD (None
    when the compactor model's price is unknown)."""
    found = summary_estimate(home, nodes)
    return found.calls, found.cost


def summary_estimate(home: Path, nodes: int) -> SummaryEstimate:
    """The calls that building `nodes` summaries takes and their cost in USD: the likeliest,
    and the range around it (never under a call a node)."""
    from evertalk.config import ConfigError, load_config
    from evertalk.import_history import measured

    try:
        config = load_config(home)
    except ConfigError:
        return _estimate(nodes, CALLS_PER_NODE, None)
    history = measured(home, config.memory_provider, config.memory.model)
    per_node = history.calls_per_node if history is not None else CALLS_PER_NODE
    one = history.cost_per_call if history is not None else None
    if one is None:
        one = _typical_call(config.memory_provider, config.memory.model)
    return _estimate(nodes, per_node, one)


def _typical_call(provider: str, model: str) -> float | None:
    from evertalk.providers.base import Usage
    from evertalk.providers.prices import cost

    typical = Usage(
        input=CALL_INPUT_TOKENS, output=CALL_OUTPUT_TOKENS, cache_read=CALL_CONTEXT_TOKENS
    )
    return cost(provider, model, typical)


def _estimate(nodes: int, per_node: float, one: float | None) -> SummaryEstimate:
    calls = round(nodes * per_node)
    low, high = max(nodes, round(calls * LOW)), max(nodes, round(calls * HIGH))

    def priced(count: int) -> float | None:
        return None if one is None else one * count

    return SummaryEstimate(calls, low, high, priced(calls), priced(low), priced(high))
