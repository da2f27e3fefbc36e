"""How many examples a property test draws: its own budget under `make test`, many times that
under `make explore`."""

from __future__ import annotations

import os

EXPLORE_FACTOR = 20


def examples(count: int) -> int:
    explore = os.environ.get("HYPOTHESIS_PROFILE") == "explore"
    return count * EXPLORE_FACTOR if explore else count
