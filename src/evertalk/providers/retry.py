"""Trying a model call again after a transient error, and saying so.

Where. One wrapper around the adapter, for every call evertalk makes (turns, subagents and
compactions alike): `make_provider` puts it there and turns the SDK's own retries off. The SDKs
retry 429s, 5xx and connection errors before a stream starts, but not a stream that breaks off
midway, they back off for seconds from a server that refused the connection, and they tell the
caller nothing; here every try is seen, and each retry is announced by a `Retrying` event.

What. An error is tried again when it is transient (`ProviderError.transient`: 429, 500–529
but 501 and 505, an error event in a stream, a stream cut off, a connection that broke before
the response; the server's `x-should-retry` has the last word). A 500 whose body is a validation
error is not: some local servers answer a request they cannot parse that way, and would refuse
each try alike (`errors.is_validation_error`). A refused connection is not:
nothing listens at that address, which is a wrong URL or a server that is down, and another
try a second later meets the same; it is said at once, naming the address. A timeout of our
own is not either: the call already waited as long as it may.

Whom for. A call a person waits for (a turn's or a subagent's: `Request.person_waits`) has the
turns' policy: about ten tries over up to two minutes of waits, each announced with its seconds
so that a client counts them down; a cancel (Ctrl+C, Esc) ends a wait at once, as it ends the
turn. A compaction keeps the default, shorter policy per call: its patience is the compactor's
own, which tries a failed node again at the next message and every 10 s while a turn waits
(SPEC §4.5), so a longer wait here would only hold its slot.

A try that broke off after its reply began. The default policy fails the call: its caller may
have used what came. The turns' policy tries it again, and its `Retrying` says that it
`replaces` what the failed try showed; the turn logs a reply's texts only once its stream has
ended (`agent/turn.py`) and runs its tools only then, so nothing of the failed try was logged or
run, and the clients drop or mark what they showed of it.

How long. At most `tries` tries in all, and no more than `patience` seconds of waits. The wait
before try n+1 is what the server asked for (`retry-after`, capped at `max_retry_after`), else
exponential backoff with full jitter: a uniform draw below min(max_delay, base_delay · 2^(n−1)),
so that clients that failed together do not come back together. The turns' waits are at most
1, 2, 4, 8, 16, then 20 s: 111 s over ten tries.
"""

from __future__ import annotations

import math
import os
import random
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping
from dataclasses import dataclass, replace

import anyio

from .base import Event, Provider, ProviderError, Request, Retrying, Started

DELAY_VARIABLE = "EVERTALK_RETRY_DELAY"
"""The backoff's base delay in seconds, when set (tests make it a few milliseconds)."""

_REASONS: dict[str, str] = {
    "rate_limit": "rate limited",
    "overloaded": "server overloaded",
    "server": "server error",
    "timeout": "server timed out",
    "cut": "the reply stream broke off",
    "connection": "connection lost",
}


TURN_TRIES = 10
"""Tries in all of a call a person waits for."""

TURN_MAX_DELAY = 20.0
"""The ceiling of a turn's backoff, in seconds: ten tries wait 111 s at most."""

TURN_PATIENCE = 120.0
"""Seconds of waits a turn's call spends at most, however long the server asks to wait."""


@dataclass(frozen=True)
class RetryPolicy:
    tries: int = 3  # in all, the first one included
    base_delay: float = 1.0  # seconds: the ceiling of the first backoff
    max_delay: float = 30.0  # the ceiling never grows past this
    max_retry_after: float = 60.0  # a longer `retry-after` is waited this long
    patience: float = math.inf  # seconds of waits in all; a wait past them is not made
    restart: bool = False  # a try that broke off after its reply began is tried again

    def for_turns(self) -> RetryPolicy:
        """The policy of a call a person waits for: more tries, over up to two minutes, and a
        reply that broke off started over; the base delay stays this one's (the tests')."""
        return replace(
            self,
            tries=max(self.tries, TURN_TRIES),
            max_delay=min(self.max_delay, TURN_MAX_DELAY),
            patience=min(self.patience, TURN_PATIENCE),
            restart=True,
        )

    def delay(self, retry: int, retry_after: float | None, draw: Callable[[], float]) -> float:
        """Seconds to wait before retry number `retry` (1 for the second try); `draw` gives a
        uniform number in [0, 1)."""
        if retry_after is not None:
            return min(retry_after, self.max_retry_after)
        ceiling = min(self.max_delay, self.base_delay * 2.0 ** (retry - 1))
        return draw() * ceiling

    @classmethod
    def from_env(cls, env: Mapping[str, str] = os.environ) -> RetryPolicy:
        """The default policy, with the base delay of `EVERTALK_RETRY_DELAY` when it is set."""
        text = env.get(DELAY_VARIABLE, "").strip()
        if not text:
            return cls()
        try:
            base = float(text)
        except ValueError:
            base = math.nan
        if not math.isfinite(base) or base < 0:
            raise ProviderError(
                "bad_request", f"{DELAY_VARIABLE}={text!r}: not a number of seconds >= 0"
            )
        return cls(base_delay=base)


def reason(error: ProviderError) -> str:
    """Why a try failed, for the `Retrying` line: `server overloaded (529)`."""
    text = _REASONS.get(error.kind, error.kind.replace("_", " "))
    return f"{text} ({error.status})" if error.status is not None else text


class RetryingProvider:
    """A provider whose calls are tried again after a transient error (see the module):
    `policy` for most calls, `turns` (default: `policy.for_turns()`) for those a person
    waits for."""

    def __init__(
        self,
        inner: Provider,
        policy: RetryPolicy | None = None,
        *,
        turns: RetryPolicy | None = None,
        draw: Callable[[], float] = random.random,
    ) -> None:
        self.inner = inner
        self.policy = policy or RetryPolicy()
        self.turns = turns or self.policy.for_turns()
        self.name = inner.name
        self._draw = draw

    def __repr__(self) -> str:
        return f"RetryingProvider({self.inner!r})"

    async def stream(self, request: Request) -> AsyncIterator[Event]:
        policy = self.turns if request.person_waits else self.policy
        attempt, waited = 1, 0.0
        while True:
            shown = False  # whether anything but Started reached the caller from this try
            events = self.inner.stream(request)
            try:
                async for event in events:
                    shown = shown or not isinstance(event, Started)
                    yield event
                return
            except ProviderError as error:
                delay = self._wait(policy, error, attempt, shown, waited)
                if delay is None:
                    raise
                failure = error
            finally:
                if isinstance(events, AsyncGenerator):  # now, not when collected: its SDK stream
                    await events.aclose()
            attempt += 1
            waited += delay
            why = reason(failure)
            yield Retrying(
                attempt=attempt,
                of=policy.tries,
                delay=delay,
                why=why,
                replaces=shown,
                usage=failure.usage,
            )
            await anyio.sleep(delay)

    def _wait(
        self, policy: RetryPolicy, error: ProviderError, attempt: int, shown: bool, waited: float
    ) -> float | None:
        """Seconds to wait before the next try after `error` ended try `attempt`; None when
        there is to be no next try."""
        if not error.transient or attempt >= policy.tries or (shown and not policy.restart):
            return None
        delay = policy.delay(attempt, error.retry_after, self._draw)
        return delay if waited + delay <= policy.patience else None

    async def aclose(self) -> None:
        await self.inner.aclose()
