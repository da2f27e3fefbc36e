"""A `-p` message held while another client's turn runs is followed from the moment that turn
takes it (`delivered`): `-p` knows it by the text its own `sent` event has, which is the log's
(valid Unicode, secrets replaced), not by the text it typed."""

from __future__ import annotations

from pathlib import Path

from agent.test_turn_support import API_KEY, log_of, turn_bodies
from fakes import AnthropicFake, ToolCall, constant, reply, slow
from fakes import chat as answer
from polling import wait_until
from served_home import fake, home, run, start

__all__ = ["fake", "home"]  # the fixtures, used by name

TYPED = f"bad \udcff bytes, and my key {API_KEY}"  # argv's undecodable byte, and a secret


def test_a_held_message_whose_text_the_service_changed_gets_its_reply(
    home: Path, fake: AnthropicFake
) -> None:
    fake.behaviour.push(  # type: ignore[attr-defined]
        slow(2, constant(reply("Checking.", ToolCall("shell", {"command": "echo checked"})))),
        answer("Done, and noted."),
    )
    first = start(home, "-p", "check the backups", "--allow", "shell")
    try:
        wait_until(lambda: turn_bodies(fake), "the first turn's call")
        result = run(home, "-p", TYPED, "--allow", "shell", timeout=30)
    finally:
        first.communicate(timeout=30)
    assert result.returncode == 0, result.stderr
    assert result.stdout == "Done, and noted.\n"
    users = [text for kind, text in log_of(home) if kind == "user"]
    assert users[-1].startswith("bad \ufffd") and users[-1].endswith("my key [redacted]")
