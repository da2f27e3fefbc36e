"""How `-p` shows a reply that broke off and starts over (`Retrying.replaces`): the retry is said
on standard error, what was printed stays, and the whole reply follows after a blank line; with
`--json` the event is in the stream."""

from __future__ import annotations

import io
import json

from evertalk.client.printers import JsonPrinter, ReplyPrinter
from evertalk.protocol.events import Event, ReplyLogged, Retrying, TextDelta, TurnEnded

WHOLE = "The backups run at noon."

EVENTS: list[Event] = [
    TextDelta("The backups "),
    TextDelta("run at"),
    Retrying(attempt=2, of=10, delay=1.5, why="the reply stream broke off", replaces=True),
    TextDelta("The backups "),
    TextDelta("run at noon."),
    ReplyLogged(WHOLE),
    TurnEnded("done"),
]


def test_a_reply_that_starts_over_is_said_and_printed_again_whole() -> None:
    out, err = io.StringIO(), io.StringIO()
    printer = ReplyPrinter(out, err)
    for event in EVENTS:
        printer.show(event)
    assert out.getvalue() == f"The backups run at\n\n{WHOLE}\n"
    assert err.getvalue() == (
        "retrying (2/10) after 1.5 s: the reply stream broke off; the reply starts over\n"
    )
    assert printer.status == 0


def test_a_retry_before_the_reply_began_prints_nothing_more() -> None:
    out, err = io.StringIO(), io.StringIO()
    printer = ReplyPrinter(out, err)
    for event in (
        Retrying(attempt=2, of=10, delay=0.5, why="server overloaded (529)"),
        TextDelta(WHOLE),
        ReplyLogged(WHOLE),
        TurnEnded("done"),
    ):
        printer.show(event)
    assert out.getvalue() == f"{WHOLE}\n"
    assert err.getvalue() == "retrying (2/10) after 0.5 s: server overloaded (529)\n"


def test_json_carries_the_replacement_and_the_seconds_to_wait() -> None:
    out, err = io.StringIO(), io.StringIO()
    printer = JsonPrinter(out, err)
    for event in EVENTS:
        printer.show(event)
    frames = [json.loads(line) for line in out.getvalue().splitlines()]
    (retrying,) = [frame for frame in frames if frame["type"] == "retrying"]
    assert retrying == {
        "type": "retrying",
        "attempt": 2,
        "of": 10,
        "delay": 1.5,
        "why": "the reply stream broke off",
        "replaces": True,
    }
    assert err.getvalue() == ""
