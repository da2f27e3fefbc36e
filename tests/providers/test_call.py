"""The one path every model call takes (`providers/call.py`): the tries, when a call counts as
answered, a stream cut short, and the ledger line each call leaves, tested once for the turns,
subagents and compactions that share it."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Sequence
from pathlib import Path

import pytest

from evertalk.ledger import Ledger, ledger_path
from evertalk.providers.base import (
    Event,
    Finished,
    Message,
    ProviderError,
    Request,
    Retrying,
    Started,
    Text,
    TextDelta,
    TextDone,
    Usage,
)
from evertalk.providers.call import Call, Meter
from evertalk.providers.retry import RetryingProvider, RetryPolicy
from fakes.scripted_provider import ScriptedProvider, fails, says

pytestmark = pytest.mark.anyio

MODEL = "claude-haiku-4-5"


class Ends:
    """A provider whose stream plays `events` and ends: with no Finished, and no error, which
    the shared path must take for a cut (the scripted fake's cut raises the adapter's error
    itself). It says `anthropic`: its calls are priced."""

    name = "anthropic"

    def __init__(self, events: Sequence[Event]) -> None:
        self.events = list(events)

    async def stream(self, request: Request) -> AsyncIterator[Event]:
        for event in self.events:
            yield event

    async def aclose(self) -> None:
        pass


def request() -> Request:
    return Request(MODEL, [Text("S")], [], [Message("user", [Text("when?")])], 100)


def lines(home: Path) -> list[dict[str, object]]:
    text = ledger_path(home).read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines()]


def without_timing(line: dict[str, object]) -> dict[str, object]:
    return {name: value for name, value in line.items() if name not in ("date", "duration_ms")}


async def test_a_complete_call_shows_every_event_and_is_recorded_by_its_caller(
    tmp_path: Path,
) -> None:
    spent: list[float] = []
    shown: list[Event] = []
    provider = ScriptedProvider(says("Tuesday.", usage=Usage(120, 8, 40, 0)))
    with Ledger(ledger_path(tmp_path)) as ledger:
        call = Call(provider, request(), Meter("turn", ledger, turn=7, on_cost=spent.append))
        finished = await call.run(shown.append)
        assert finished.text == "Tuesday." and call.answered
        assert [type(event) for event in shown] == [Started, TextDelta, TextDone, Finished]
        assert not ledger_path(tmp_path).exists()  # the caller records it: it may judge it first
        cost = call.record(finished.usage)
    assert cost is not None and cost > 0 and spent == [cost]
    (line,) = lines(tmp_path)
    assert without_timing(line) == {
        "role": "turn",
        "provider": "anthropic",
        "model": MODEL,
        "input": 120,
        "output": 8,
        "cache_read": 40,
        "cache_write": 0,
        "cost": cost,
        "turn": 7,
    }


async def test_a_failed_try_is_recorded_once_billed_and_the_next_starts_afresh(
    tmp_path: Path,
) -> None:
    scripted = ScriptedProvider(
        fails("overloaded", "Overloaded", begun=True, usage=Usage(300, 2)),  # billed
        fails("rate_limit", "slow down", 429),  # refused before any response
        says("Tuesday."),
    )
    provider = RetryingProvider(scripted, RetryPolicy(base_delay=0.0))
    shown: list[Event] = []
    with Ledger(ledger_path(tmp_path)) as ledger:
        call = Call(provider, request(), Meter("compaction", ledger, node="40+8"))
        assert (await call.run(shown.append)).text == "Tuesday."
    assert [type(event) for event in shown][:4] == [Started, Retrying, Retrying, Started]
    (line,) = lines(tmp_path)
    assert line["failed"] is True and line["node"] == "40+8" and line["role"] == "compaction"
    assert (line["input"], line["output"]) == (300, 2)


@pytest.mark.parametrize(("unknown", "reported"), [(Usage(reported=False), False), (Usage(), None)])
async def test_a_call_that_fails_after_its_response_began_is_in_the_ledger(
    tmp_path: Path, unknown: Usage, reported: bool | None
) -> None:
    provider = ScriptedProvider(fails("auth", "Anthropic: key revoked", begun=True))
    with Ledger(ledger_path(tmp_path)) as ledger:
        call = Call(provider, request(), Meter("subagent", ledger, unknown=unknown))
        with pytest.raises(ProviderError) as raised:
            await call.run()
    assert raised.value.kind == "auth" and call.answered
    (line,) = lines(tmp_path)
    assert line["failed"] is True and line["input"] == 0 and line.get("reported") == reported


async def test_a_call_refused_before_any_response_is_no_call(tmp_path: Path) -> None:
    provider = ScriptedProvider(fails("auth", "Anthropic: invalid x-api-key", 401))
    spent: list[float] = []
    with Ledger(ledger_path(tmp_path)) as ledger:
        call = Call(provider, request(), Meter("turn", ledger, on_cost=spent.append))
        with pytest.raises(ProviderError):
            await call.run()
    assert not call.answered and spent == []
    assert not ledger_path(tmp_path).exists()


async def test_a_stream_that_ends_before_the_reply_is_cut_and_recorded(tmp_path: Path) -> None:
    reported = Usage(500, 0)
    with Ledger(ledger_path(tmp_path)) as ledger:
        call = Call(Ends([Started(reported), TextDelta("Tue")]), request(), Meter("turn", ledger))
        with pytest.raises(ProviderError) as raised:
            await call.run()
    assert raised.value.kind == "cut" and raised.value.transient
    assert "ended before the reply was complete" in str(raised.value)
    (line,) = lines(tmp_path)
    # the cut came from the stream's end, not the adapter: nothing said what it used
    assert line["failed"] is True and line["reported"] is False and line["input"] == 0


async def test_a_call_with_no_ledger_is_still_priced() -> None:
    spent: list[float] = []
    call = Call(ScriptedProvider(says("Tuesday.")), request(), Meter("turn", on_cost=spent.append))
    finished = await call.run()
    call.failed()  # what a caller records of a call it gave up on (a deadline)
    assert call.record(finished.usage) == spent[-1] and len(spent) == 2 and spent[0] == 0.0
