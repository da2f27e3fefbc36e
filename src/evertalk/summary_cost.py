"""What building summaries will cost, said before it is done (an import's preview, the preview
of `memory forget`): the compactor's calls for a number of nodes that need one, and their price.

Standard library only at import time, like the commands that use it: the preview must come fast.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

CALL_CONTEXT_TOKENS: Final = 8_000  # a compaction's cached prefix and context (SPEC §3.7)
CALL_INPUT_TOKENS: Final = 600  # the node's own input, new each call
CALL_OUTPUT_TOKENS: Final = 150  # one summary line


def summary_calls(home: Path, nodes: int) -> tuple[int, float | None]:
    """The calls that building `nodes` summaries takes and their cost in USD (None when the
    compactor model's price is unknown): the ledger's calls per node and cost per call for this
    model when it has enough of them, else one call a node at typical sizes and the price
    table's rates."""
    from evertalk.config import ConfigError, load_config
    from evertalk.import_history import measured
    from evertalk.providers.base import Usage
    from evertalk.providers.prices import cost

    try:
        config = load_config(home)
    except ConfigError:
        return nodes, None
    typical = Usage(
        input=CALL_INPUT_TOKENS, output=CALL_OUTPUT_TOKENS, cache_read=CALL_CONTEXT_TOKENS
    )
    one = cost(config.memory_provider, config.memory.model, typical)
    history = measured(home, config.memory_provider, config.memory.model)
    calls = nodes
    if history is not None:
        calls = round(nodes * history.calls_per_node)
        one = history.cost_per_call if history.cost_per_call is not None else one
    return calls, None if one is None else one * calls
