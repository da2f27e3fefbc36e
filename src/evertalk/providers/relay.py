"""Pumping an SDK stream into our events, with errors mapped outside the SDK's handlers; what
the adapters share around it (the SDK client's timeout, a tool call's streamed JSON input)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from typing import Any, Literal

import anyio
import httpx2

from evertalk.providers.base import Event, ProviderError

MapError = Callable[[Exception, bool], ProviderError]
"""(SDK exception, whether the response had started) → our typed error."""

CONNECT_TIMEOUT = 10.0
"""Seconds to wait for a connection; `timeout` bounds every other wait (the Anthropic SDK's own
default is 10 minutes, and it applies between two bytes of a stream, not to the whole call)."""


def sdk_timeout(timeout: float) -> httpx2.Timeout:
    """An SDK client's timeout: `timeout` seconds, and no more than CONNECT_TIMEOUT to
    connect."""
    return httpx2.Timeout(timeout, connect=min(timeout, CONNECT_TIMEOUT))


def tool_input(
    raw: str,
    name: str,
    *,
    cut: bool,
    empty: dict[str, Any],
    what: Literal["input", "arguments"],
) -> dict[str, Any] | None:
    """A tool call's input from its streamed JSON `raw` (`empty` when there is none); None when
    `cut` (the reply stopped short in this call) and the input is missing or incomplete JSON,
    which is the limit's doing, not a server's fault. `what`: the API's word for the input."""
    if not raw.strip():
        return None if cut else empty
    try:
        value = json.loads(raw)
    except ValueError:
        if cut:
            return None
        raise ProviderError("server", f"tool call {name} has invalid JSON {what}") from None
    if not isinstance(value, dict):
        verb = "is" if what == "input" else "are"
        raise ProviderError("server", f"tool call {name} {what} {verb} not an object")
    return value


async def relay(
    open_stream: Callable[[], Awaitable[Any]],
    feed: Callable[[Any], Iterable[Event]],
    done: Callable[[], bool],
    map_error: MapError,
) -> AsyncIterator[Event]:
    """Yield the events `feed` makes of each SDK item until the stream ends or `done()`.

    Errors are raised outside the `except` blocks, so no SDK exception (whose context might
    hold request details) is chained to ours. The SDK stream is always closed, even when the
    caller is cancelled.
    """
    error: ProviderError | None = None
    try:
        sdk_stream = await open_stream()
    except Exception as exc:
        error = map_error(exc, False)
    if error is not None:
        raise error
    try:
        iterator = sdk_stream.__aiter__()
        while not done():
            try:
                item = await iterator.__anext__()
            except StopAsyncIteration:
                break
            except Exception as exc:
                error = map_error(exc, True)
            if error is not None:
                raise error
            for event in feed(item):
                yield event
    finally:
        with anyio.CancelScope(shield=True):
            await sdk_stream.close()


def connect_failed(exc: BaseException) -> bool:
    """Whether no connection was made at all (refused, no such host, unreachable): the error,
    or one it was raised from, is httpx2's ConnectError. Unlike a connection that broke after
    it was made, another try a moment later meets the same."""
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        if isinstance(current, httpx2.ConnectError):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False
