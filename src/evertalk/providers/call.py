"""One model call, from its request to its reply, accounted for in one place.

Turns, subagents and compactions call a model the same way: through the provider (whose
`retry.RetryingProvider` sends a failed try again and says so), with the reply collected whole
(`base.collect`: a stream that ends before its reply is a cut, never a short reply), and each
call written to the usage ledger (SPEC §1.8).

A try is a call once anything of its response has come ("answered"): from then on it may be
billed, so it is recorded even when it fails, with what the provider had reported of it. A try
that failed before any response is no call, and leaves no line.

What differs stays with each caller: a complete call is recorded by its caller (the compactor
first judges the reply, and records why it rejected it); a turn estimates what a call it
cancelled midway used; the compactor records a call its deadline cut off.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal, Protocol

from evertalk.providers.base import (
    Event,
    Finished,
    Provider,
    ProviderError,
    Request,
    Retrying,
    Usage,
    collect,
)
from evertalk.providers.prices import cost as price_of

Role = Literal["turn", "compaction", "subagent"]

UNREPORTED = Usage(reported=False)
"""The usage of a call whose provider said nothing of it: unknown, not free."""


class UsageLog(Protocol):
    """Where calls are written (`ledger.Ledger`), named by what a Meter calls of it: the ledger
    is a floor above the providers (it takes their `Usage`)."""

    def record(
        self,
        *,
        role: str,
        provider: str,
        model: str,
        usage: Usage,
        cost: float | None,
        duration_ms: float,
        node: str | None = None,
        turn: int | str | None = None,
        failed: bool = False,
        rejected: str | None = None,
        estimated: bool = False,
    ) -> object: ...


def _spend(cost: float) -> None:
    """Spending that nobody adds up."""


def _show(event: Event) -> None:
    """Events that nobody shows."""


@dataclass(frozen=True)
class Meter:
    """Where one caller's calls are accounted: priced, written to the ledger (if any) under the
    caller's role and label (a turn's id, a compaction's node), and added to its spending.

    `unknown`: what a call that failed without its provider reporting any usage is recorded
    as (a turn says the counts are unknown; the compactor has always written zeros)."""

    role: Role
    ledger: UsageLog | None = None
    turn: int | str | None = None
    node: str | None = None
    on_cost: Callable[[float], None] = _spend
    unknown: Usage = UNREPORTED

    def record(
        self,
        provider: str,
        model: str,
        usage: Usage,
        started: float,
        *,
        failed: bool = False,
        estimated: bool = False,
        rejected: str | None = None,
    ) -> float | None:
        """One call that began at `started` (the monotonic clock); returns its cost in USD, None
        when the model's price is unknown."""
        cost = price_of(provider, model, usage)
        if self.ledger is not None:
            self.ledger.record(
                role=self.role,
                provider=provider,
                model=model,
                usage=usage,
                cost=cost,
                duration_ms=(time.monotonic() - started) * 1e3,
                node=self.node,
                turn=self.turn,
                failed=failed,
                rejected=rejected,
                estimated=estimated,
            )
        self.on_cost(cost or 0.0)
        return cost


@dataclass
class Call:
    """One call of `request` through `provider`, its retries included. `started`: when its
    latest try began; `answered`: whether anything of that try's response came."""

    provider: Provider
    request: Request
    meter: Meter
    started: float = field(default=0.0, init=False)
    answered: bool = field(default=False, init=False)

    async def run(self, show: Callable[[Event], None] = _show) -> Finished:
        """The complete reply; each event goes to `show` as it comes (a Retrying once the try it
        replaces is recorded, when it was billed). A call that fails after its response began
        is recorded, failed, before its error is raised."""
        self._restart()

        def observe(event: Event) -> None:
            if isinstance(event, Retrying):
                if event.usage is not None:
                    self.failed(event.usage)
                self._restart()
            else:
                self.answered = True
            show(event)

        try:
            return await collect(self.provider, self.request, observe)
        except ProviderError as error:
            if self.answered:  # a cut stream, an error event: a call all the same (SPEC §1.8)
                self.failed(error.usage)
            raise

    def record(
        self,
        usage: Usage,
        *,
        failed: bool = False,
        estimated: bool = False,
        rejected: str | None = None,
    ) -> float | None:
        """The latest try in the ledger, as its caller judges it; returns its cost. The model is
        the request's: a caller's settings may change while the call runs."""
        return self.meter.record(
            self.provider.name,
            self.request.model,
            usage,
            self.started,
            failed=failed,
            estimated=estimated,
            rejected=rejected,
        )

    def failed(self, usage: Usage | None = None) -> float | None:
        """The latest try, failed, with what it used (the meter's `unknown` when not said)."""
        return self.record(usage or self.meter.unknown, failed=True)

    def _restart(self) -> None:
        self.started, self.answered = time.monotonic(), False
