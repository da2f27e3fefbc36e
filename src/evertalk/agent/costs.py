"""What a session spent, as its status shows it: `Costs`."""

from __future__ import annotations

from evertalk.budget import compactor_pause
from evertalk.compactor.service import Compactor
from evertalk.ledger import DaySpending, Ledger


class Costs:
    """The cost of this session's turns and subagents, and the day's cost of the chat's home
    from the ledger, so that a restart does not reset what the status shows. The compactor
    pauses while the day's cost is over the daily `budget` (None: no budget)."""

    def __init__(self, ledger: Ledger, compactor: Compactor, budget: float | None) -> None:
        self.compactor = compactor
        self.turn_cost = 0.0
        self.spent_today = None if ledger is None else DaySpending(ledger.path)
        compactor.follow_budget(compactor_pause(self.spent, budget))

    def add(self, cost: float) -> None:
        """A call of a turn or a subagent was billed."""
        self.turn_cost += cost

    def spent(self) -> float:
        """Today's cost of the chat's home from the ledger; without one, this session's."""
        if self.spent_today is None:
            return self.turn_cost + self.compactor.cost
        return self.spent_today.cost()

    def carry(self, turns: float, summaries: float) -> None:
        """Add what the sessions closed before this one spent, on turns and on summaries."""
        self.turn_cost += turns
        self.compactor.carry_cost(summaries)
