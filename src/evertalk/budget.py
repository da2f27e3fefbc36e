"""A daily budget, so that spending cannot surprise: `[budget] daily = 5.00` in config.toml.

Off by default. The figure is dollars by the ledger's prices (`ledger.py`), today's calls of the
chat's home, whoever made them: any window's turns, `-p`, the subagents, the summaries. A turn
that would start with the day already at or past the budget is asked about in the app and
refused by `-p` unless `--over-budget`; the compactor pauses at COMPACTOR_SHARE times the
budget (summaries can wait; the chat goes on with coarser lines), and goes on the next day or
once the budget is raised. Nothing here imports the agent: clients read it too.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from evertalk.ledger import DaySpending, ledger_path

COMPACTOR_SHARE: Final = 1.5
"""The compactor pauses once the day's spending reaches this many times the budget."""
OVER_BUDGET_FLAG: Final = "--over-budget"


def dollars(cost: float) -> str:
    """`$0.42`, `$0.0031` (below a cent), `$0.00`."""
    if cost <= 0:
        return "$0.00"
    if cost < 0.01:
        return f"${cost:.4f}"
    return f"${cost:,.2f}"


@dataclass(frozen=True)
class Day:
    """Today's spending against the budget (None: no budget)."""

    spent: float
    daily: float | None

    @property
    def over(self) -> bool:
        """Whether a turn would start at or past the budget."""
        return self.daily is not None and self.spent >= self.daily

    @property
    def compactor_paused(self) -> bool:
        return self.daily is not None and self.spent >= COMPACTOR_SHARE * self.daily

    def shown(self) -> str:
        """`$1.23/$5.00` for the status bar (`$1.23` with no budget)."""
        if self.daily is None:
            return dollars(self.spent)
        return f"{dollars(self.spent)}/{dollars(self.daily)}"

    def over_line(self) -> str:
        """Why a turn is asked about or refused: one line."""
        return (
            f"today's spending, {dollars(self.spent)}, is over the daily budget of "
            f"{dollars(self.daily or 0.0)} ([budget] daily in config.toml)"
        )

    def usage_line(self) -> str:
        """What `evertalk usage` says of today under its table."""
        if self.daily is None:
            return f"today: {dollars(self.spent)} (no daily budget: [budget] daily sets one)"
        share = self.spent / self.daily
        line = (
            f"today: {dollars(self.spent)} of the daily budget of {dollars(self.daily)} "
            f"({share:.0%})"
        )
        if self.compactor_paused:
            return line + f"; summaries are paused (past {COMPACTOR_SHARE:g}× the budget)"
        if self.over:
            return line + "; a turn asks first (-p: --over-budget)"
        return line + f"; {dollars(self.daily - self.spent)} left"


def today(home: Path, daily: float | None) -> Day:
    """Today's spending of `home`'s chat, read from its ledger."""
    return Day(DaySpending(ledger_path(home)).cost(), daily)


def compactor_pause(spent: Callable[[], float], daily: float | None) -> Callable[[], str | None]:
    """For the compactor: why it pauses now (one `memory:` line), or None."""

    def why() -> str | None:
        if daily is None:
            return None
        day = Day(spent(), daily)
        if not day.compactor_paused:
            return None
        return (
            f"memory: summaries are paused: today's spending, {dollars(day.spent)}, is past "
            f"{COMPACTOR_SHARE:g}× the daily budget of {dollars(daily)}; they go on tomorrow, "
            "or once [budget] daily is raised (the chat goes on meanwhile)"
        )

    return why
