"""What `-p` shows of a turn that waits for a chat to catch up: a line on standard error now
and then (the reply stays alone on standard output), and with `--json` the events themselves."""

from __future__ import annotations

import io
import json

from evertalk.client.printers import CATCH_UP_EVERY, NOW_HINT, JsonPrinter, ReplyPrinter
from evertalk.protocol.events import CatchingUp, ReplyLogged, TurnEnded, TurnStarted


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_progress_goes_to_stderr_about_every_ten_seconds() -> None:
    out, err, clock = io.StringIO(), io.StringIO(), Clock()
    printer = ReplyPrinter(out, err, clock=clock)
    printer.show(CatchingUp(1204, None))
    clock.now += 1
    printer.show(CatchingUp(1190, None))  # a second later: not printed again
    clock.now += CATCH_UP_EVERY
    printer.show(CatchingUp(1100, 185.0))
    printer.show(TurnStarted([3000]))
    printer.show(ReplyLogged("Here is what I remember."))
    printer.show(TurnEnded("done"))
    assert err.getvalue().splitlines() == [
        "catching up: 1,204 summaries to go, estimating… (evertalk -p --now starts a turn "
        "without waiting)",
        "catching up: 1,100 summaries to go, about 3 min",
    ]
    assert out.getvalue() == "Here is what I remember.\n"


def test_the_next_turns_wait_is_shown_from_its_start() -> None:
    err, clock = io.StringIO(), Clock()
    printer = ReplyPrinter(io.StringIO(), err, clock=clock)
    printer.show(CatchingUp(12, None))
    printer.show(TurnStarted([1]))
    clock.now += 1
    printer.show(CatchingUp(1, 20.0))
    assert err.getvalue().splitlines()[-1] == (
        "catching up: 1 summary to go, less than a minute" + NOW_HINT  # a new wait
    )


def test_json_mode_prints_the_event_like_the_others() -> None:
    out = io.StringIO()
    printer = JsonPrinter(out, io.StringIO())
    printer.show(CatchingUp(1204, 185.5, 21_000))
    printer.show(CatchingUp(3, None))
    assert [json.loads(line) for line in out.getvalue().splitlines()] == [
        {"type": "catching_up", "to_go": 1204, "eta_seconds": 185.5, "view_tokens": 21_000},
        {"type": "catching_up", "to_go": 3, "eta_seconds": None, "view_tokens": None},
    ]
