"""A forget while a turn runs and while a compaction over the range is in flight (SPEC §12): the
turn is cancelled, saying why; the compaction's call is cancelled and its line, made from the
old text, is never stored; every summary over the message is built again without the text; and
the next turn's request holds the text in no form."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import anyio
import pytest
from test_memory_requests import client

from agent.test_turn_support import is_compaction, log_of, write_config
from evertalk.chat import Chat
from evertalk.client.remote import RequestFailed
from evertalk.memory.tree import BUILT
from evertalk.protocol.events import MemoryWarning, TurnEnded
from evertalk.protocol.replies import Accepted, Compact, ForgetPreview, Forgotten, Reopened
from evertalk.protocol.requests import Forget, GetCompact, Send
from evertalk.service.forget_requests import STOPS_TURN
from fakes import AnthropicFake, Call, Reply, Script, Text, chat, slow
from fakes.behaviours import Outcome, sized_line

pytestmark = pytest.mark.anyio
WORD = "zqheliotrope-6093"
HELD_S = 60.0
"""A call that holds the word is answered this late: in flight until something cancels it."""


def forms(word: str) -> list[bytes]:
    data = word.encode()
    return [data, data.hex().encode(), base64.b64encode(data).rstrip(b"=")]


def summaries(call: Call) -> Outcome:
    """A line that keeps every `zq` word of its input (so each summary over the message holds
    the word); held while its input holds the word."""
    source = call.input_text
    kept = [word for word in source.split() if word.startswith("zq")]
    reply = Reply(pieces=(Text(sized_line(" ".join([*kept, source]), 300)),))
    return slow(HELD_S, lambda _: reply)(call) if WORD in source else reply


@pytest.fixture
def home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    write_config(home, settle=0)  # the turn sends its request with the compaction in flight
    with Chat.open(home / "chat") as chat_:
        for n in range(6):
            long = " ".join(f"step{n}x{j} of the backup plan" for j in range(60))
            text = f"{WORD} is the key; {long}" if n == 2 else f"message {n}: {long}"
            chat_.append("user" if n % 2 == 0 else "ever", text)
    return home


def _holds_word(record: Any) -> bool:
    raw = json.dumps(record.body).encode()
    return any(form in raw for form in forms(WORD))


async def _until(found: Any) -> None:
    with anyio.fail_after(20):
        while not found():
            await anyio.sleep(0.01)


async def test_a_forget_cancels_the_turn_and_the_compaction_and_no_stale_line_lands(
    home: Path,
) -> None:
    script = Script().route(is_compaction, summaries).push(slow(HELD_S, chat("never said")))
    fake = AnthropicFake(script)
    async with client(home, fake) as (remote, seen):
        await _until(lambda: any(_compaction(r) and _holds_word(r) for r in fake.records))
        await remote.request(Send(text="what was the plan?", key="q1"), Accepted)
        await _until(lambda: any(r.body and not _compaction(r) for r in fake.records))

        preview = await remote.request(Forget(range="2", preview=True), ForgetPreview)
        assert preview.changes and not [f for f in seen if isinstance(f, TurnEnded)]
        with pytest.raises(RequestFailed, match=r"the chat has \d+ messages"):  # none there:
            await remote.request(Forget(range="99"), Forgotten)
        assert not [f for f in seen if isinstance(f, TurnEnded)]  # the turn went on
        done = await remote.request(Forget(range="2", reason="a key"), Forgotten)
        assert done.messages == 1
        await _until(lambda: any(isinstance(f, TurnEnded) for f in seen))
        ended = [f for f in seen if isinstance(f, TurnEnded)]
        assert [f.reason for f in ended] == ["cancelled"]
        await _until(lambda: any(isinstance(f, Reopened) for f in seen))
        with anyio.fail_after(30):
            while (await remote.request(GetCompact(), Compact)).left:
                await anyio.sleep(0.05)

        before = len(fake.records)
        await remote.request(Send(text="and now?", key="q2"), Accepted)
        await _until(lambda: len([f for f in seen if isinstance(f, TurnEnded)]) == 2)
        turns = [r for r in fake.records[before:] if r.body and not _compaction(r)]
        assert turns and not [r for r in turns if _holds_word(r)]  # the next turn's request
        warned = [f.text for f in seen if isinstance(f, MemoryWarning)]
        assert not [w for w in warned if "could not be summarized" in w], warned

    kinds = log_of(home)
    assert ("echo", f"turn stopped: {STOPS_TURN}") in kinds
    assert kinds[2][1].startswith("[forgotten on ") and kinds[2][1].endswith(": a key]")
    with Chat.open(home / "chat", readonly=True) as reopened:
        flags = reopened.store.node_flags()
        assert all(all(row) for row in flags)  # everything built again
        over = [
            (level, 2 >> level) for level in range(len(flags)) if (2 >> level) < len(flags[level])
        ]
        assert [n for n in over if flags[n[0]][n[1]] == BUILT]  # the model built some of them
        assert not [n for n in over if WORD in (reopened.text_of(n) or "")]
    for path in home.rglob("*"):
        if path.is_file():
            data = path.read_bytes()
            assert not [form for form in forms(WORD) if form in data], path


def _compaction(record: Any) -> bool:
    return record.body is not None and is_compaction(SimpleNamespace(body=record.body))
