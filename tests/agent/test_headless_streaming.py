"""`evertalk -p` streams the reply on standard output as the model writes it, as `llm` does:
the first words show while the rest is still coming, and what comes out in the end is the whole
reply. `--json` stays one event per line."""

from __future__ import annotations

import io
import os
import selectors
import subprocess
import time
from pathlib import Path

from test_turn_support import log_of, workdir_beside

from evertalk.client.printers import ReplyPrinter
from evertalk.protocol.events import (
    ReplyLogged,
    TextDelta,
    ToolFinished,
    ToolStarted,
    TurnEnded,
    TurnStarted,
)
from fakes import AnthropicFake, ToolCall, reply
from served_home import environment, evertalk, fake, home

__all__ = ["fake", "home"]  # the fixtures, used by name

FIRST = "The first words of the reply. "
REST = "And then a good many more words, streamed slowly, one piece at a time. " * 3


def popen(home: Path, *args: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        evertalk(*args),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=environment(home),
        cwd=workdir_beside(home),
    )


def read_until(process: subprocess.Popen[bytes], wanted: bytes, within: float = 60) -> bytes:
    """What standard output gave until `wanted` showed (or it ended, or `within` passed)."""
    assert process.stdout is not None
    got = b""
    deadline = time.monotonic() + within
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        while wanted not in got and time.monotonic() < deadline:
            if selector.select(deadline - time.monotonic()):
                chunk = os.read(process.stdout.fileno(), 4096)
                if not chunk:
                    break
                got += chunk
    return got


def test_the_first_words_show_before_the_reply_is_done(home: Path, fake: AnthropicFake) -> None:
    # slow pieces: the reply takes seconds to stream, and is logged only once it is whole
    fake.behaviour.push(reply(FIRST + REST, chunk_delay=0.3))  # type: ignore[attr-defined]
    process = popen(home, "-p", "tell me at length")
    try:
        early = read_until(process, FIRST.strip().encode())
        assert FIRST.strip().encode() in early
        # the reply is not logged yet: it was printed as it came, not once it ended
        assert [kind for kind, _ in log_of(home)] == ["user"]
        rest, err = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 0, err
    assert (early + rest).decode() == (FIRST + REST).strip() + "\n"


def test_json_stays_one_event_per_line(home: Path, fake: AnthropicFake) -> None:
    fake.behaviour.push(reply(FIRST + REST, chunk_delay=0.3))  # type: ignore[attr-defined]
    process = popen(home, "-p", "tell me", "--json")
    try:
        early = read_until(process, b'"text_delta"')
        assert [kind for kind, _ in log_of(home)] == ["user"]
        rest, _ = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    lines = (early + rest).decode().splitlines()
    assert all(line.startswith("{") and line.endswith("}") for line in lines)


def show(*events: object) -> str:
    out = io.StringIO()
    printer = ReplyPrinter(out, io.StringIO())
    for event in events:
        printer.show(event)  # type: ignore[arg-type]
    return out.getvalue()


def test_texts_around_a_tool_call_are_printed_as_they_come_apart() -> None:
    shown = show(
        TurnStarted([0]),
        TextDelta("Let me "),
        TextDelta("check."),
        ReplyLogged("Let me check."),
        ToolStarted("t1", "date", {"id": 0}),
        ToolFinished("t1", "date", "message 0: today", False),
        TextDelta("It is "),
        TextDelta("today."),
        ReplyLogged("It is today."),
        TurnEnded("done"),
    )
    assert shown == "Let me check.\n\nIt is today.\n"


def test_a_reply_cut_off_prints_only_what_was_not_shown() -> None:
    shown = show(
        TurnStarted([0]),
        TextDelta("Half of it"),
        ReplyLogged("Half of it\n[cut off]"),
        TurnEnded("cancelled"),
    )
    assert shown == "Half of it\n[cut off]\n"


def test_a_reply_that_did_not_stream_is_printed_whole() -> None:
    shown = show(TurnStarted([0]), ReplyLogged("All at once."), TurnEnded("done"))
    assert shown == "All at once.\n"
    two_turns = show(
        TurnStarted([0]),
        TextDelta("One."),
        ReplyLogged("One."),
        TurnEnded("done"),
        TurnStarted([2]),
        TextDelta("Two."),
        ReplyLogged("Two."),
        TurnEnded("done"),
    )
    assert two_turns == "One.\nTwo.\n"


def test_a_tool_call_before_any_text_adds_no_blank_line() -> None:
    shown = show(
        TurnStarted([0]),
        ToolStarted("t1", "date", {"id": 0}),
        ToolFinished("t1", "date", "x", False),
        TextDelta("Done."),
        ReplyLogged("Done."),
        TurnEnded("done"),
    )
    assert shown == "Done.\n"


def test_a_tool_after_text_in_a_reply_keeps_it(home: Path, fake: AnthropicFake) -> None:
    fake.behaviour.push(  # type: ignore[attr-defined]
        reply("Let me check.", ToolCall("date", {"id": 0})), reply("It is message 0.")
    )
    process = popen(home, "-p", "when did I write this?")
    out, err = process.communicate(timeout=60)
    assert process.returncode == 0, err
    assert out.decode() == "Let me check.\n\nIt is message 0.\n"
