"""`-p` in a terminal: a reply or a warning that holds escape sequences cannot drive the terminal;
piped to a program, the reply is the text as the model wrote it."""

from __future__ import annotations

import io

from evertalk.client.printers import ReplyPrinter
from evertalk.protocol.events import MemoryWarning, ReplyLogged, TurnEnded

HOSTILE = "done \x1b[2J\x1b]0;pwned\x07 \x9b6n"


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def run(out: io.StringIO, err: io.StringIO, *, raw: bool = False) -> None:
    printer = ReplyPrinter(out, err, raw=raw)
    for event in (
        MemoryWarning(f"memory: {HOSTILE}"),
        ReplyLogged(HOSTILE),
        TurnEnded("error", error=f"the server said {HOSTILE}"),
    ):
        printer.show(event)


def test_a_terminal_sees_control_characters_escaped() -> None:
    out, err = Terminal(), Terminal()
    run(out, err)
    for text in (out.getvalue(), err.getvalue()):
        assert "\x1b" not in text and "\x07" not in text and "\x9b" not in text
        assert "\\x1b[2J" in text
    assert out.getvalue() == "done \\x1b[2J\\x1b]0;pwned\\x07 \\x9b6n\n"


def test_a_program_reading_the_reply_gets_it_as_written() -> None:
    out, err = io.StringIO(), io.StringIO()
    run(out, err)
    assert out.getvalue() == HOSTILE + "\n"
    assert "\x1b" not in err.getvalue()  # standard error is for a person, always


def test_raw_writes_the_reply_as_written_to_a_terminal_too() -> None:
    out, err = Terminal(), Terminal()
    run(out, err, raw=True)
    assert out.getvalue() == HOSTILE + "\n"
    assert "\x1b" not in err.getvalue()  # the warnings and the stopped line stay escaped
