"""Transient errors are tried again and said (`Retrying`): a compaction's call at most three
tries, a turn's about ten over up to two minutes, a turn's reply that broke off midway from the
start (said to replace what it showed). What is not transient fails at once, and so does a
compaction's try that already began its reply.

The providers are made as evertalk makes them (`make_provider`: the SDK's own retries off, ours
on) and talk to the fakes through the real SDKs, in-process or over a real refused socket.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import httpx2
import pytest

from evertalk.providers.anthropic import AnthropicProvider
from evertalk.providers.base import (
    Event,
    Finished,
    Message,
    Provider,
    ProviderError,
    Request,
    Retrying,
    Started,
    Text,
    TextDelta,
)
from evertalk.providers.factory import make_provider
from evertalk.providers.retry import DELAY_VARIABLE, RetryingProvider, RetryPolicy, reason
from fakes import IN_PROCESS_URL, AnthropicFake, Fail, OpenAIFake, async_client, chat, fail
from fakes.behaviours import (
    Behaviour,
    cut_at_start,
    cut_in_text,
    dropped,
    error_event,
    flaky,
    overloaded,
    rate_limited,
    server_error,
)
from fakes.scripted_provider import ScriptedProvider

pytestmark = pytest.mark.anyio

KEY = "sk-ant-test-RETRY-0123456789"
FAST = RetryPolicy(base_delay=0.001)


def request(*, person_waits: bool = False) -> Request:
    return Request(
        "claude-haiku-4-5",
        [Text("S")],
        [],
        [Message("user", [Text("hi")])],
        50,
        person_waits=person_waits,
    )


def anthropic(behaviour: Behaviour, policy: RetryPolicy = FAST) -> tuple[Provider, AnthropicFake]:
    fake = AnthropicFake(behaviour)
    client = async_client(fake.app)
    return make_provider("anthropic", KEY, IN_PROCESS_URL, client, retry=policy), fake


def openai(behaviour: Behaviour, policy: RetryPolicy = FAST) -> tuple[Provider, OpenAIFake]:
    fake = OpenAIFake(behaviour)
    client = async_client(fake.app)
    return make_provider("openai", KEY, f"{IN_PROCESS_URL}/v1", client, retry=policy), fake


async def events_of(
    provider: Provider, *, person_waits: bool = False
) -> tuple[list[Event], ProviderError | None]:
    """Every event of one call (a turn's when `person_waits`), and the error it ended with
    (None: it finished)."""
    seen: list[Event] = []
    try:
        async for event in provider.stream(request(person_waits=person_waits)):
            seen.append(event)
    except ProviderError as error:
        return seen, error
    finally:
        await provider.aclose()
    return seen, None


def retries(events: list[Event]) -> list[Retrying]:
    return [event for event in events if isinstance(event, Retrying)]


@pytest.mark.parametrize(
    ("fault", "why"),
    [
        (overloaded, "server overloaded (529)"),
        (rate_limited, "rate limited (429)"),
        (server_error, "server error (500)"),
        (cut_at_start, "the reply stream broke off"),
        (dropped, "the reply stream broke off"),
        (error_event, "server overloaded"),
    ],
)
@pytest.mark.parametrize("make", [anthropic, openai])
async def test_a_transient_failure_is_tried_again_and_said(
    make: Callable[[Behaviour], tuple[Provider, Any]], fault: Any, why: str
) -> None:
    provider, fake = make(flaky(chat("ok"), (fault,)))
    events, error = await events_of(provider)
    assert error is None
    assert isinstance(events[-1], Finished) and events[-1].text == "ok"
    (retry,) = retries(events)
    assert (retry.attempt, retry.of) == (2, 3)
    if make is openai and fault is error_event:
        why = "server error"  # the OpenAI fake's error event is a server_error
    assert retry.why == why
    assert retry.line.startswith("retrying (2/3) after ") and retry.line.endswith(f" s: {why}")
    assert len(fake.records) == 2


async def test_three_tries_at_most_then_the_last_error() -> None:
    provider, fake = anthropic(fail(529))
    events, error = await events_of(provider)
    assert error is not None and (error.kind, error.status) == ("overloaded", 529)
    assert [(r.attempt, r.of) for r in retries(events)] == [(2, 3), (3, 3)]
    assert len(fake.records) == 3  # the SDK's own retries are off: 3 tries, not 3 x 5


async def test_a_compactions_stream_cut_after_text_began_is_not_tried_again() -> None:
    """The default policy: its caller may have used what came. The error goes up, and the
    compactor counts it against the node."""
    provider, fake = anthropic(
        flaky(chat("a reply long enough to stream in pieces"), (cut_in_text,))
    )
    events, error = await events_of(provider)
    assert error is not None and error.kind == "cut"
    assert any(isinstance(event, TextDelta) for event in events)
    assert not retries(events) and len(fake.records) == 1


@pytest.mark.parametrize("status", [400, 401, 403, 404, 501])
async def test_what_another_try_cannot_mend_fails_at_once(status: int) -> None:
    provider, fake = anthropic(fail(status))
    events, error = await events_of(provider)
    assert error is not None and error.status == status
    assert not retries(events) and len(fake.records) == 1


async def test_the_server_can_say_not_to_retry() -> None:
    provider, fake = anthropic(lambda call: Fail(503, should_retry=False))
    events, error = await events_of(provider)
    assert error is not None and error.status == 503
    assert not retries(events) and len(fake.records) == 1


async def test_retry_after_is_honoured_and_capped() -> None:
    policy = RetryPolicy(base_delay=1000, max_retry_after=0.05)
    provider, _ = anthropic(fail(429, times=1, then=chat("ok"), retry_after_ms=20), policy)
    events, error = await events_of(provider)
    assert error is None and [r.delay for r in retries(events)] == [0.02]
    provider, _ = anthropic(fail(429, times=1, then=chat("ok"), retry_after_ms=3000), policy)
    events, error = await events_of(provider)
    assert error is None and [r.delay for r in retries(events)] == [0.05]


async def test_the_backoff_is_exponential_with_full_jitter() -> None:
    policy = RetryPolicy(tries=4, base_delay=0.004, max_delay=0.010)
    draws = iter([0.5, 1.0, 0.25])
    fake = AnthropicFake(fail(500, retry_after_ms=None))
    inner = AnthropicProvider(
        KEY, IN_PROCESS_URL, http_client=async_client(fake.app), max_retries=0
    )
    provider = RetryingProvider(inner, policy, draw=lambda: next(draws))
    events, error = await events_of(provider)
    assert error is not None
    # the ceiling doubles from the base (4 ms, 8 ms) up to the cap (10 ms); the delay is a
    # uniform draw below it
    assert [r.delay for r in retries(events)] == [0.002, 0.008, 0.0025]
    assert RetryPolicy().delay(1, None, lambda: 1.0) == RetryPolicy().base_delay


def refused_url(host: str = "127.0.0.1") -> str:
    """A loopback address nothing listens on: a port bound once, then let go."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    return f"http://{host}:{port}"


class Counting(httpx2.AsyncBaseTransport):
    """The real network transport, counting the connection attempts."""

    def __init__(self) -> None:
        self.inner = httpx2.AsyncHTTPTransport()
        self.attempts = 0

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        self.attempts += 1
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


@pytest.mark.parametrize(
    ("kind", "host", "path"),
    [
        ("anthropic", "127.0.0.1", ""),
        ("openai", "127.0.0.1", "/v1"),
        ("ollama", "localhost", "/v1"),
    ],
)
async def test_a_refused_connection_is_said_at_once_naming_the_address(
    kind: str, host: str, path: str
) -> None:
    """Nothing listens there: another try cannot help, so one attempt, no backoff, and the
    error names where it looked, as it is (a local server's placeholder key `local` is no
    secret: `localhost` is not `[redacted]host`)."""
    url = refused_url(host) + path
    transport = Counting()
    client = httpx2.AsyncClient(transport=transport)
    slow = RetryPolicy(base_delay=60)
    provider = make_provider(kind, KEY if kind != "ollama" else None, url, client, retry=slow)
    events, error = await events_of(provider)
    assert error is not None and error.kind == "connection"
    assert str(error).endswith(f"could not connect (at {url})")
    assert transport.attempts == 1 and not retries(events)


async def test_a_connection_dropped_before_the_response_is_tried_again() -> None:
    """The server took the request and closed the connection without answering (a reset):
    unlike a refusal, the next try may well get through."""
    answered = [False]

    async def app(scope: Any, receive: Any, send: Any) -> None:
        if not answered[0]:  # the first request: no response at all
            answered[0] = True
            return
        await fake(scope, receive, send)

    fake = AnthropicFake(chat("ok"))
    provider = make_provider("anthropic", KEY, IN_PROCESS_URL, async_client(app), retry=FAST)
    events, error = await events_of(provider)
    assert error is None and [r.why for r in retries(events)] == ["connection lost"]


async def test_a_second_try_starts_a_fresh_response() -> None:
    """What the caller sees of a retried call: Started once per try that began, then the
    reply of the try that got through."""
    provider, _ = anthropic(flaky(chat("ok"), (cut_at_start,)))
    events, _ = await events_of(provider)
    kinds = [type(event).__name__ for event in events]
    assert kinds[:3] == ["Started", "Retrying", "Started"] and kinds[-1] == "Finished"
    assert sum(isinstance(event, Started) for event in events) == 2


async def test_a_failed_try_that_began_reports_its_usage() -> None:
    """A response that began was billed: the Retrying event carries what it used, so that the
    caller's ledger keeps it."""
    provider, _ = anthropic(flaky(chat("ok"), (cut_at_start,)))
    events, _ = await events_of(provider)
    (retry,) = retries(events)
    assert retry.usage is not None and retry.usage.input > 0
    provider, _ = anthropic(flaky(chat("ok"), (overloaded,)))
    events, _ = await events_of(provider)
    assert retries(events)[0].usage is None  # a 529 is not billed


def test_the_policy_from_the_environment() -> None:
    assert RetryPolicy.from_env({}) == RetryPolicy()
    assert RetryPolicy.from_env({DELAY_VARIABLE: "0.005"}).base_delay == 0.005
    for bad in ("soon", "-1", "nan", "inf"):
        with pytest.raises(ProviderError, match=DELAY_VARIABLE):
            RetryPolicy.from_env({DELAY_VARIABLE: bad})


def test_reasons_read_as_people_say_them() -> None:
    assert reason(ProviderError("overloaded", "x", 529)) == "server overloaded (529)"
    assert reason(ProviderError("timeout", "x", 504)) == "server timed out (504)"
    assert reason(ProviderError("connection", "x", transient=True)) == "connection lost"


# -- a call a person waits for: the turns' policy ---------------------------------------------


async def test_a_turns_call_is_tried_ten_times() -> None:
    provider, fake = anthropic(fail(529))
    events, error = await events_of(provider, person_waits=True)
    assert error is not None and error.status == 529
    assert [(r.attempt, r.of) for r in retries(events)] == [(n, 10) for n in range(2, 11)]
    assert len(fake.records) == 10


@pytest.mark.parametrize("make", [anthropic, openai])
async def test_a_turns_reply_that_broke_off_midway_starts_over(
    make: Callable[[Behaviour], tuple[Provider, Any]],
) -> None:
    provider, fake = make(flaky(chat("a reply long enough to stream in pieces"), (cut_in_text,)))
    events, error = await events_of(provider, person_waits=True)
    assert error is None
    (retry,) = retries(events)
    assert retry.replaces and retry.line.endswith("; the reply starts over")
    before = events[: events.index(retry)]
    assert any(isinstance(event, TextDelta) for event in before)  # it had shown some
    after = events[events.index(retry) + 1 :]
    assert "".join(e.text for e in after if isinstance(e, TextDelta)) == (
        "a reply long enough to stream in pieces"
    )
    assert len(fake.records) == 2


async def test_a_retry_before_the_reply_began_replaces_nothing() -> None:
    provider, _ = anthropic(flaky(chat("ok"), (overloaded, cut_at_start)))
    events, error = await events_of(provider, person_waits=True)
    assert error is None and [r.replaces for r in retries(events)] == [False, False]


def test_the_turns_waits_last_up_to_two_minutes() -> None:
    """At the ceiling of every draw, ten tries wait 111 s in all; the compactions' policy is
    left as it was."""
    turns = RetryPolicy().for_turns()
    waits = [turns.delay(n, None, lambda: 1.0) for n in range(1, turns.tries)]
    assert turns.tries == 10 and turns.restart
    assert waits == [1.0, 2.0, 4.0, 8.0, 16.0, 20.0, 20.0, 20.0, 20.0]
    assert 100 <= sum(waits) <= turns.patience == 120
    assert RetryingProvider(ScriptedProvider()).policy == RetryPolicy()
    assert (RetryPolicy().tries, RetryPolicy().restart) == (3, False)
    assert RetryPolicy.from_env({DELAY_VARIABLE: "0.005"}).for_turns().base_delay == 0.005


async def test_a_turn_waits_no_longer_than_its_patience() -> None:
    """A server that keeps asking for more time: the waits stop before they pass it."""
    turns = RetryPolicy(base_delay=0.001).for_turns()
    provider = RetryingProvider(
        AnthropicProvider(
            KEY,
            IN_PROCESS_URL,
            http_client=async_client(AnthropicFake(fail(429, retry_after_ms=20)).app),
            max_retries=0,
        ),
        turns=replace(turns, patience=0.05),
    )
    events, error = await events_of(provider, person_waits=True)
    assert error is not None and error.status == 429
    assert [r.delay for r in retries(events)] == [0.02, 0.02]  # a third would pass 0.05 s
