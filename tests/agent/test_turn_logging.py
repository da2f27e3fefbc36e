"""When a turn logs its reply texts (SPEC §6.3): once the reply's stream has ended, since a stream
that breaks off is tried again from the start (`test_turn_retries.py`); each text block before
the reply's first tool call on its own, texts after a tool call after that call's `tool` and
`echo`; what a call that failed for good had shown, marked as cut off; every message once,
whatever is re-sent."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import pytest
from test_turn_support import (
    bare_loop,
    collect_turn,
    log_of,
    opened,
    records_of,
    script,
)

from evertalk.agent.tools import ToolContext
from evertalk.agent.turn import REPLY_CUT
from evertalk.chat import Chat
from evertalk.protocol.events import CallUsage, ReplyLogged, ToolStarted, TurnEnded
from evertalk.providers.base import Text
from fakes import AnthropicFake, OpenAIFake, ToolCall, reply
from fakes import chat as answer
from fakes.scripted_provider import Reply, ScriptedProvider, says, uses

pytestmark = pytest.mark.anyio

DATE = ToolCall("date", {"id": 0})


@pytest.mark.parametrize("mode", ["abort", "eof", "error"])
async def test_a_text_block_shown_before_a_cut_that_fails_the_turn_is_logged_as_cut_off(
    home: Path, mode: Literal["abort", "eof", "error"]
) -> None:
    """A provider without our retries: the cut fails the call, and the log keeps what the user
    saw, saying where it was cut off, as a cancel does. No tool call ran."""
    # message_start, the text block's start, a ping, its one delta, its stop: then the cut,
    # where the tool call's block would start
    fake = AnthropicFake(script().push(reply("Let me look.", DATE, cut_after=5, cut_mode=mode)))
    async with opened(home, fake) as agent:
        agent.submit("when did I write this?")
        seen = await collect_turn(agent)
    ended = seen[-1]
    assert isinstance(ended, TurnEnded) and ended.reason == "error"
    assert not any(isinstance(event, ReplyLogged | ToolStarted) for event in seen)
    log = log_of(home)
    assert [kind for kind, _ in log] == ["user", "ever", "echo"]
    assert log[1][1] == f"Let me look.\n\n{REPLY_CUT}{ended.error}]"
    assert log[2][1] == f"turn stopped: {ended.error}"


async def test_openai_a_text_run_shown_before_a_cut_that_fails_the_turn_is_logged_as_cut_off(
    home: Path,
) -> None:
    # the role chunk, the text, the tool call's first chunk (which ends the text run): then the cut
    fake = OpenAIFake(script().push(reply("Let me look.", DATE, cut_after=3)))
    async with opened(home, fake) as agent:
        agent.submit("when did I write this?")
        seen = await collect_turn(agent)
    ended = seen[-1]
    assert isinstance(ended, TurnEnded) and ended.reason == "error"
    assert [kind for kind, _ in log_of(home)] == ["user", "ever", "echo"]
    assert log_of(home)[1] == ("ever", f"Let me look.\n\n{REPLY_CUT}{ended.error}]")


async def test_texts_before_a_tool_call_are_logged_each_once_the_reply_is_whole(
    home: Path,
) -> None:
    fake = AnthropicFake(
        script().push(reply("First.", "   ", "Second.", DATE), answer("It is message 0."))
    )
    async with opened(home, fake) as agent:
        agent.submit("when did I write this?")
        seen = await collect_turn(agent)
    assert isinstance(seen[-1], TurnEnded) and seen[-1].reason == "done"
    log = log_of(home)
    assert [kind for kind, _ in log] == ["user", "ever", "ever", "tool", "echo", "ever"]
    assert [text for kind, text in log if kind == "ever"] == [
        "First.",
        "Second.",
        "It is message 0.",
    ]
    logged = [e.text for e in seen if isinstance(e, ReplyLogged)]
    assert logged == ["First.", "Second.", "It is message 0."]
    # once the reply's stream ended (its usage comes then), before its tool call runs
    first_usage = next(i for i, e in enumerate(seen) if isinstance(e, CallUsage))
    assert seen.index(ReplyLogged("First.")) > first_usage
    assert seen.index(ReplyLogged("Second.")) < next(
        i for i, e in enumerate(seen) if isinstance(e, ToolStarted)
    )
    keys = [r["key"] for r in records_of(home) if r.get("key")]
    assert len(keys) == len(set(keys)) == 6  # the message's own key too (its held entry's)


async def test_texts_after_a_tool_call_follow_its_results(home: Path) -> None:
    fake = AnthropicFake(
        script().push(reply("Before.", DATE, "After.", DATE), answer("Both done."))
    )
    async with opened(home, fake) as agent:
        agent.submit("twice")
        seen = await collect_turn(agent)
    assert isinstance(seen[-1], TurnEnded) and seen[-1].reason == "done"
    log = log_of(home)
    kinds = [kind for kind, _ in log]
    assert kinds == ["user", "ever", "tool", "echo", "ever", "tool", "echo", "ever"]
    assert [text for kind, text in log if kind == "ever"] == ["Before.", "After.", "Both done."]


class Resending:
    """A log that sends every append twice, as a retry after a lost answer would."""

    def __init__(self, chat: Chat) -> None:
        self.chat = chat

    def append(
        self,
        kind: str,
        text: str,
        *,
        key: str | None = None,
        images: list[str] | None = None,
        agent: str | None = None,
        failed: bool = False,
    ) -> list[int]:
        first = self.chat.append(kind, text, key=key, images=images, agent=agent, failed=failed)
        again = self.chat.append(kind, text, key=key, images=images, agent=agent, failed=failed)
        assert again == first
        return first


def messages_of(chat: Chat) -> list[tuple[str, str]]:
    return [(r.kind, r.text) for r in (chat.store.read_message(i) for i in range(chat.t))]


async def test_re_sent_appends_and_a_rerun_turn_log_nothing_twice(
    chat: Chat, ctx: ToolContext, tmp_path: Path
) -> None:
    turn = (uses("date", {"id": 0}, text="Let me check."), says("Done."))
    provider = ScriptedProvider(*turn, *turn)  # the turn, then the same turn run again
    loop = bare_loop(provider, Resending(chat), ctx, tmp_path / "images")
    ending = await loop.run("<chat></chat>", "when?", 7)
    assert ending.event.reason == "done" and ending.final == "Done."
    once = messages_of(chat)
    assert [kind for kind, _ in once] == ["ever", "tool", "echo", "ever"]
    assert once[0] == ("ever", "Let me check.")
    # the same turn run again (a restart): every append is a known key
    await loop.run("<chat></chat>", "when?", 7)
    assert messages_of(chat) == once
    assert provider.pending == 0 and len(provider.requests) == 4


async def test_a_final_reply_of_several_blocks_is_the_whole_report(
    chat: Chat, ctx: ToolContext, tmp_path: Path
) -> None:
    provider = ScriptedProvider(Reply((Text("One."), Text("Two."))))
    ending = await bare_loop(provider, Resending(chat), ctx, tmp_path / "images").run(
        "<chat></chat>", "go", 1
    )
    assert ending.final == "One.\n\nTwo."
    assert messages_of(chat) == [("ever", "One."), ("ever", "Two.")]
