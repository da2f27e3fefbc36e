"""A chat that is behind after an import: its first turn sees the newest messages word for
word after the view, and the view shows the unsummarized stretch as a few aligned ranges, not
a placeholder line per message."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from test_catching_up import NEVER, opened
from test_turn_support import collect_turn, script, turn_bodies, user_texts, write_config

from evertalk.protocol.events import TurnEnded
from evertalk.store.records import encode_message
from fakes import AnthropicFake, slow, summarizer
from fakes import chat as answer

pytestmark = pytest.mark.anyio

MESSAGES = 3_000
FACT = "the spare key of the boathouse is under the blue flowerpot"
PLANTED = MESSAGES - 7
UNBUILT = re.compile(r"^\d+\+\d+\|(\(not summarized yet|\[not yet summarized)", re.MULTILINE)


def imported_home(home: Path) -> None:
    """3,000 messages of 600 bytes (too long to be their own summaries) written as an import
    leaves them: a log, no tree, no view.json. One of the 20 newest holds the fact."""
    write_config(home)
    lines = []
    for i in range(MESSAGES):
        kind = "user" if i % 2 else "ever"
        text = f"{kind} {i}: " + "notes on the nightly backups " * 20
        if i == PLANTED:
            text = f"{FACT}; " + text
        lines.append(encode_message(i, kind, text, "2026-10-01T09:00:00+02:00"))
    main = home / "chat" / "main"
    main.mkdir(parents=True, mode=0o700)
    (main / "2026-10-01.jsonl").write_bytes(b"\n".join(lines) + b"\n")


async def test_the_first_turn_after_an_import_sees_the_newest_messages(tmp_path: Path) -> None:
    home = tmp_path / "home"
    imported_home(home)
    fake = AnthropicFake(script(slow(NEVER, summarizer(100))).push(answer("Under the pot.")))
    async with opened(home, fake, catch_up_timeout=0.5) as agent:
        agent.submit("where is the spare key?")
        seen = await collect_turn(agent, timeout=120)
    assert seen[-1] == TurnEnded("done")
    (body,) = turn_bodies(fake)
    sent = user_texts(body)
    view, _, after = sent.partition("</chat>")
    assert FACT in after  # after the view, word for word
    assert FACT not in view
    assert f"{PLANTED}+1|user: {FACT}" in after  # whole, with its id as a zoom shows it
    newest = [int(i) for i in re.findall(r"^(\d+)\+1\|", after, re.MULTILINE)]
    assert newest == sorted(newest) and newest[-1] == MESSAGES - 1
    assert len(after.encode()) <= 26_000  # about 24 KB of messages, the header and the question
    assert len(UNBUILT.findall(view)) <= 40  # a few ranges, not one line per message
