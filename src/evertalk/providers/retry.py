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

When. Only while the try has yielded nothing but `Started`: no text, no thought, no tool call,
no reply. The caller shows deltas as they come and logs each text block as it completes (SPEC
§6.3), so a second try after any of that would show the user, and maybe log, the same words
twice. A stream that breaks off midway through the reply therefore fails the call; the turn
keeps what it logged and says how to try it again (`/retry`, `evertalk -p --retry`).

How long. At most `tries` tries in all. The wait before try n+1 is what the server asked for
(`retry-after`, capped at `max_retry_after`), else exponential backoff with full jitter: a
uniform draw below min(max_delay, base_delay · 2^(n−1)), so that clients that failed together
do not come back together.
"""

from __future__ import annotations

import math
import os
import random
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping
from dataclasses import dataclass

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


@dataclass(frozen=True)
class RetryPolicy:
    tries: int = 3  # in all, the first one included
    base_delay: float = 1.0  # seconds: the ceiling of the first backoff
    max_delay: float = 30.0  # the ceiling never grows past this
    max_retry_after: float = 60.0  # a longer `retry-after` is waited this long

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
    """A provider whose calls are tried again after a transient error (see the module)."""

    def __init__(
        self,
        inner: Provider,
        policy: RetryPolicy | None = None,
        *,
        draw: Callable[[], float] = random.random,
    ) -> None:
        self.inner = inner
        self.policy = policy or RetryPolicy()
        self.name = inner.name
        self._draw = draw

    def __repr__(self) -> str:
        return f"RetryingProvider({self.inner!r})"

    async def stream(self, request: Request) -> AsyncIterator[Event]:
        attempt = 1
        while True:
            failure: ProviderError | None = None
            shown = False  # whether anything but Started reached the caller from this try
            events = self.inner.stream(request)
            try:
                async for event in events:
                    shown = shown or not isinstance(event, Started)
                    yield event
                return
            except ProviderError as error:
                if shown or not error.transient or attempt >= self.policy.tries:
                    raise
                failure = error
            finally:
                if isinstance(events, AsyncGenerator):  # now, not when collected: its SDK stream
                    await events.aclose()
            attempt += 1
            delay = self.policy.delay(attempt - 1, failure.retry_after, self._draw)
            yield Retrying(attempt, self.policy.tries, delay, reason(failure), failure.usage)
            await anyio.sleep(delay)

    async def aclose(self) -> None:
        await self.inner.aclose()
